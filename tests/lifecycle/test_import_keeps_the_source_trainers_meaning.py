"""A key means what its source trainer means by it (issue 27): fractional save_steps/eval_steps are a share of the
run's steps (transformers' TrainerState.compute_steps), a boolean scale_rewards is TRL's group/none, and keys that only
matter elsewhere (the Hub, Weights & Biases, remote generation, an SFT trainer) are notes, not refusals."""

import pytest

from runs.lifecycle.trl_yaml import parse_run_yaml

pytestmark = pytest.mark.django_db

BASE = "model_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [format]\nmax_steps: 40\n"


def test_fractional_save_and_eval_steps_are_a_share_of_the_steps(owner, eval_version):
    imported = parse_run_yaml(BASE + "save_steps: 0.05\neval_steps: 0.2\n", owner=owner)
    assert imported.errors == []
    assert imported.config["save_steps"] == 2  # ceil(40 x 0.05), not 0 (no checkpoints)
    assert imported.evaluation["eval_steps"] == 8
    assert any(n.startswith("save_steps: 0.05 is a share of the run's 40 steps") for n in imported.notes)


def test_a_boolean_scale_rewards_is_read_as_trl_reads_it(owner, dataset_version):
    for value, meant in (("false", "none"), ("true", "group")):
        imported = parse_run_yaml(BASE + f"scale_rewards: {value}\n", owner=owner)
        assert imported.errors == [] and imported.config["scale_rewards"] == meant
        assert any(n.startswith("scale_rewards:") and repr(meant) in n for n in imported.notes)


def test_keys_that_only_matter_elsewhere_are_notes(owner, dataset_version):
    text = (
        BASE + "hub_model_revision: v01.00\nwandb_entity: huggingface\nwandb_project: open-r1\n"
        "remote_gen_model_url: http://gen:8000\nmax_seq_length: 4096\nuse_liger: true\n"
    )
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == []
    noted = {n.split(":", 1)[0] for n in imported.notes}
    assert {"hub_model_revision", "wandb_entity", "wandb_project", "remote_gen_model_url"} <= noted
    assert any(n.startswith("max_seq_length:") and "add `trainer: sft`" in n for n in imported.notes)


def test_a_file_that_looks_like_sft_is_told_to_say_trainer_sft(owner, dataset_version):
    imported = parse_run_yaml("model_name_or_path: tiny\ndataset_name: arithmetic\npacking: false\n", owner=owner)
    assert any(e.startswith("trainer: this looks like an SFT config (it has packing") for e in imported.errors)


def test_an_sft_runs_older_key_names_are_read_under_the_new_ones(owner, dataset_version):
    text = "trainer: sft\nmodel_name_or_path: tiny\ndataset_name: arithmetic\nmax_seq_length: 64\n"
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == [] and imported.config["max_length"] == 64


def test_oumi_trainer_kwargs_are_read_as_trl_fields(owner, dataset_version):
    text = (
        "model:\n  model_name: tiny\ndata:\n  train:\n    datasets:\n      - dataset_name: arithmetic\n"
        "training:\n  trainer_type: TRL_GRPO\n  reward_functions: [format]\n  per_device_train_batch_size: 8\n"
        "  trainer_kwargs:\n    vllm_mode: server\n    num_generations: 4\n"
    )
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == []
    assert imported.config["vllm_mode"] == "server" and imported.config["num_generations"] == 4
    assert "training.trainer_kwargs.vllm_mode: read as vllm_mode: 'server'" in imported.notes


def test_oumis_own_settings_are_not_said_to_be_set_by_grpo_web(owner, dataset_version):
    text = (
        "model:\n  model_name: tiny\ndata:\n  train:\n    datasets:\n      - dataset_name: arithmetic\n"
        "training:\n  trainer_type: TRL_GRPO\n  reward_functions: [format]\n  optimizer: adafactor\n"
        "  enable_wandb: true\n  output_dir: out\n"
    )
    imported = parse_run_yaml(text, owner=owner)
    notes = {n.split(":", 1)[0]: n for n in imported.notes}
    # to_hf passes optimizer to TRL as optim: carried, not "Oumi's own"
    assert "Oumi passes it to TRL as optim" in notes["training.optimizer"] and imported.extra["optim"] == "adafactor"
    assert "report_to: grpo-web reports to no tracker" in notes["training.enable_wandb"]
    assert "grpo-web gives each run its own folder" in notes["training.output_dir"]
