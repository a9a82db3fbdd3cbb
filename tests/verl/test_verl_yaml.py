"""verl's own config (its ppo_trainer.yaml with a GRPO example's overrides, as verl composes it) and Oumi GRPO
training configs import into the run form; a verl run's YAML reads back as a verl run."""

from pathlib import Path

import pytest
import verl
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Run

pytestmark = pytest.mark.django_db


def verl_yaml(*extra) -> dict:
    """verl's GRPO example (examples/grpo_trainer), composed onto its default config: the YAML a verl user has."""
    example = [
        "algorithm.adv_estimator=grpo",
        "data.train_files=/home/me/data/arithmetic/train.parquet",
        "data.train_batch_size=32",
        "data.max_response_length=48",
        "actor_rollout_ref.model.path=tiny",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.actor.ppo_mini_batch_size=16",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.rollout.n=4",
        "trainer.n_gpus_per_node=2",
        "trainer.experiment_name=arith_grpo",
        "trainer.total_training_steps=7",
        *extra,
    ]
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return OmegaConf.to_container(compose("ppo_trainer", overrides=example), resolve=False)


def test_verls_config_imports_as_a_verl_run(owner, dataset_version):
    data = {**verl_yaml(), "reward_funcs": ["digit_ratio"]}
    imported = parse_run_yaml(yaml.safe_dump(data), owner=owner)
    assert not imported.errors, imported.errors
    assert imported.trainer == "verl" and imported.kind == "grpo"
    assert imported.dataset_version == dataset_version  # the folder of data.train_files names it
    assert imported.requested_gpus == 2 and imported.model == "tiny" and imported.name == "arith_grpo"
    c = imported.config
    assert (c["num_generations"], c["beta"], c["learning_rate"], c["max_completion_length"], c["max_steps"]) == (
        4,
        0.001,
        1e-6,
        48,
        7,
    )
    # 16 prompts x 4 completions an update over 2 GPUs: 32 a GPU, one pass (no micro-batch set); 2 updates a step
    assert c["per_device_train_batch_size"] == 16 * 4 // 2 and c["gradient_accumulation_steps"] == 1
    assert c["steps_per_generation"] == 2
    assert any(n.startswith("data.train_files") for n in imported.notes)
    assert any("not applied" in n for n in imported.notes)  # verl keys with no grpo-web field say so


def test_a_verl_config_that_is_not_grpo_is_refused(owner, dataset_version):
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        data = OmegaConf.to_container(compose("ppo_trainer"), resolve=False)  # PPO with GAE
    imported = parse_run_yaml(yaml.safe_dump(data), owner=owner)
    assert any("adv_estimator" in e for e in imported.errors)


OUMI_TRL = """
model:
  model_name: "tiny"
  torch_dtype_str: "bfloat16"
data:
  train:
    datasets:
      - dataset_name: "arithmetic"
        split: "train"
training:
  trainer_type: "TRL_GRPO"
  save_steps: 500
  per_device_train_batch_size: 8
  gradient_accumulation_steps: 1
  reward_functions: ["digit_ratio"]
  enable_gradient_checkpointing: False
  compile: True
  max_steps: 5
  learning_rate: 3.0e-6
  output_dir: "output/arith.grpo"
  grpo:
    num_generations: 4
    max_completion_length: 32
    temperature: 0.9
"""


def test_an_oumi_trl_grpo_config_imports_as_a_trl_run(owner, dataset_version):
    imported = parse_run_yaml(OUMI_TRL, owner=owner)
    assert not imported.errors, imported.errors
    assert imported.trainer == "trl" and imported.dataset_version == dataset_version
    c = imported.config
    assert (
        c["per_device_train_batch_size"],
        c["num_generations"],
        c["max_completion_length"],
        c["temperature"],
        c["max_steps"],
        c["learning_rate"],
        c["gradient_checkpointing"],
    ) == (8, 4, 32, 0.9, 5, 3e-6, False)
    assert [r["name"] for r in imported.rewards] == ["digit_ratio"]
    assert any(n.startswith("training.compile") for n in imported.notes)
    assert any(n.startswith("model.torch_dtype_str") for n in imported.notes)


def test_an_oumi_verl_grpo_config_imports_as_a_verl_run_with_its_overrides(owner, dataset_version):
    text = (
        OUMI_TRL.replace('"TRL_GRPO"', '"VERL_GRPO"')
        + """
  verl_config_overrides:
    actor_rollout_ref:
      actor:
        kl_loss_coef: 0.02
        use_kl_loss: true
"""
    )
    imported = parse_run_yaml(text, owner=owner)
    assert not imported.errors, imported.errors
    assert imported.trainer == "verl" and imported.requested_gpus == 1 and imported.config["beta"] == 0.02


def test_an_oumi_config_for_another_trainer_is_refused(owner, dataset_version):
    imported = parse_run_yaml(OUMI_TRL.replace('"TRL_GRPO"', '"TRL_DPO"'), owner=owner)
    assert any(e.startswith("training.trainer_type: 'TRL_DPO'") for e in imported.errors)


def test_a_verl_runs_yaml_reads_back_as_a_verl_run(owner, dataset_version, monkeypatch):
    monkeypatch.setattr("runs.lifecycle.services.capacity_problems", lambda **kw: [])
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="v",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[{"name": "digit_ratio", "weight": 1.0, "builtin": "digit_ratio"}],
            config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 3},
            requested_gpus=1,
            trainer="verl",
        ),
        queue_anyway=True,
    )
    assert run.trainer == Run.Trainer.VERL
    back = parse_run_yaml(run_yaml(run), owner=owner)
    assert not back.errors and back.trainer == "verl" and back.kind == "grpo"


def test_a_verl_run_without_a_gpu_is_refused(owner, dataset_version):
    from runs.lifecycle.services import RunRefused

    with pytest.raises(RunRefused, match="verl"):
        run_create(
            owner=owner,
            spec=RunSpec(
                name="v",
                model="tiny",
                dataset_version=dataset_version,
                rewards=[{"name": "digit_ratio", "weight": 1.0, "builtin": "digit_ratio"}],
                config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 3},
                trainer="verl",
            ),
        )


def test_a_verl_run_resumes_from_verls_checkpoint_folder(owner, dataset_version, monkeypatch):
    from runs.paths import checkpoint_path

    monkeypatch.setattr("runs.lifecycle.services.capacity_problems", lambda **kw: [])
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="v",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[{"name": "digit_ratio", "weight": 1.0, "builtin": "digit_ratio"}],
            config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 3},
            requested_gpus=1,
            trainer="verl",
        ),
        queue_anyway=True,
    )
    run.checkpoint_step = 2
    assert checkpoint_path(run) is None  # not on disk
    (run.run_dir / "output" / "checkpoints" / "global_step_2").mkdir(parents=True)
    assert checkpoint_path(run) == run.run_dir / "output" / "checkpoints" / "global_step_2"
