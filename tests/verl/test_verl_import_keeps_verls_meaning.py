"""A verl config's keys mean what verl means by them (issue 27): train_batch_size prompts a step over all GPUs,
ppo_mini_batch_size prompts an update, ppo_micro_batch_size_per_gpu completions a pass on each GPU (verl's
fsdp_workers); the import keeps them and verl gets them back unchanged, not inflated. total_epochs and test_freq carry
over, the GPUs are n_gpus_per_node x nnodes, and Oumi's ``algorithm:`` overrides merge into GRPO's, as Oumi merges
them."""

import pytest
from grpo_web_protocol.config import GRPOFields, TrainConfig
from grpo_web_protocol.verl_keys import overrides

from runs.lifecycle.trl_yaml import parse_run_yaml

pytestmark = pytest.mark.django_db

VERL = """algorithm:
  adv_estimator: grpo
data:
  train_files: ~/data/arithmetic/train.parquet
  train_batch_size: 1024
actor_rollout_ref:
  model:
    path: tiny
  actor:
    ppo_mini_batch_size: 256
    ppo_micro_batch_size_per_gpu: 32
  rollout:
    n: 5
trainer:
  n_gpus_per_node: 4
  nnodes: 2
  total_epochs: 3
  test_freq: 5
reward_funcs: [format]
"""


def verl_overrides(imported) -> dict:
    config = TrainConfig(
        model="tiny", dataset_path="d", output_dir="o", event_log="e", rewards=[], grpo=GRPOFields(**imported.config)
    )
    gpus = imported.requested_gpus
    values = overrides(config, train_file="t", val_file="v", reward_path="r", config_path="c", gpus=gpus // 2, nnodes=2)
    return dict(v.split("=", 1) for v in values)


def test_verls_batches_come_back_to_verl_unchanged(owner, eval_version):
    imported = parse_run_yaml(VERL, owner=owner)
    assert imported.errors == []
    assert imported.requested_gpus == 8
    # 256 prompts x 5 completions over 8 GPUs: 160 a GPU an update, in passes of 32
    assert imported.config["per_device_train_batch_size"] == 32
    assert imported.config["gradient_accumulation_steps"] == 5
    assert imported.config["steps_per_generation"] == 20  # 4 updates a step
    got = verl_overrides(imported)
    assert got["data.train_batch_size"] == "1024"
    assert got["actor_rollout_ref.actor.ppo_mini_batch_size"] == "256"
    assert got["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == "32"
    assert got["trainer.n_gpus_per_node"] == "4" and got["trainer.nnodes"] == "2"


def test_total_epochs_and_test_freq_carry_over(owner, eval_version):
    imported = parse_run_yaml(VERL.replace("1024", "16").replace("256", "8").replace("32\n", "5\n"), owner=owner)
    assert imported.errors == []
    # 50 training rows // 16 prompts a step = 3 steps an epoch (verl drops the last partial batch), 3 epochs
    assert eval_version.train_rows == 50
    assert imported.config["max_steps"] == 9
    assert imported.evaluation["eval_steps"] == 5


def test_oumis_algorithm_overrides_merge_into_grpo(owner, dataset_version):
    text = (
        "model:\n  model_name: tiny\ndata:\n  train:\n    datasets:\n      - dataset_name: arithmetic\n"
        "training:\n  trainer_type: VERL_GRPO\n  reward_functions: [format]\n  verl_config_overrides:\n"
        "    algorithm:\n      kl_ctrl:\n        kl_coef: 0.001\n    trainer:\n      n_gpus_per_node: 4\n"
    )
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == []  # not "algorithm.adv_estimator: 'gae'"
    assert imported.trainer == "verl" and imported.requested_gpus == 4


def test_a_full_verl_config_notes_only_what_differs_from_verls_own_defaults(owner, tiny_model):
    """verl's whole composed config (its generated ppo_trainer.yaml with a launch script's overrides) used to give a
    note for each of its hundreds of keys, defaults the user never chose. Now a key at verl's own default (verl's
    shipped config, read here with verl's OmegaConf) is counted, not listed: a note names only a key whose value
    differs, or one this verl's config does not have."""
    from pathlib import Path

    import verl
    import yaml
    from grpo_web_protocol.verl_keys import flatten
    from omegaconf import OmegaConf

    from tests.lifecycle.published_corpus import corpus_owner_setup, corpus_yaml

    shipped = Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    defaults = flatten(OmegaConf.to_container(OmegaConf.create(yaml.safe_load(shipped.read_text())), resolve=True))
    corpus_owner_setup(owner)
    imported = parse_run_yaml(corpus_yaml("verl_generated_ppo_trainer.yaml"), owner=owner)
    composed = flatten(yaml.safe_load(corpus_yaml("verl_generated_ppo_trainer.yaml")))
    listed = [n.split(":", 1)[0] for n in imported.notes if "not applied" in n]
    assert listed, imported.notes
    for key in listed:  # each listed key differs from verl's default, or verl here has no such key
        assert key not in defaults or defaults[key] != composed[key], key
    counted = [n for n in imported.notes if "more keys hold verl's own defaults" in n]
    assert len(counted) == 1
    quiet = int(counted[0].split(" ", 1)[0])
    assert quiet > 200 and len(imported.notes) < 80
