"""Every key of a verl file reaches verl's composed config as written when verl trains it, is translated with a note
naming both values, or is refused with a reason; a key the file leaves out takes verl's own default (its
ppo_trainer.yaml, as verl composes it), not TRL's nor a value grpo-web hard-codes (issue 43, item 1). Where TRL trains
the file, a verl setting TRL has no equivalent of is refused by name, never dropped."""

from pathlib import Path

import pytest
import verl
import yaml
from grpo_web_protocol.config import EvalFields, GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.verl_keys import flatten, overrides
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from runs.lifecycle.services import spec_problems
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.trl_yaml import parse_run_yaml

pytestmark = pytest.mark.django_db

CONFIG_DIR = Path(verl.__file__).parent / "trainer" / "config"
BASE = {
    "algorithm": {"adv_estimator": "grpo"},
    "data": {"train_files": "~/data/arithmetic/train.parquet", "train_batch_size": 8},
    "actor_rollout_ref": {
        "model": {"path": "tiny"},
        "actor": {"ppo_mini_batch_size": 4, "ppo_micro_batch_size_per_gpu": 4},
        "rollout": {"n": 4},
    },
    "trainer": {"n_gpus_per_node": 1, "total_training_steps": 3},
    "reward_funcs": ["format"],
}


def verls_own_defaults() -> dict:
    """verl's default config as verl composes it (Hydra, its ppo_trainer), flattened; interpolations resolved."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose("ppo_trainer", overrides=["actor_rollout_ref.rollout.name=vllm"])
    return flatten(OmegaConf.to_container(cfg, resolve=True))


def with_keys(**dotted) -> str:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    for key, value in dotted.items():
        node = data
        *parents, leaf = key.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return yaml.safe_dump(data)


def composed(imported, gpus: int = 1, nnodes: int = 1) -> dict:
    """What the worker gives verl for this import (workers.training.verl_run.verl_config, less the data files),
    composed onto verl's ppo_trainer.yaml by Hydra and migrated by verl's own legacy-key migration."""
    from workers.training import verl_run

    migrate_legacy_keys = getattr(verl_run, "migrate_legacy_keys", lambda cfg: cfg)  # before issue 43: none

    config = TrainConfig(
        model="tiny",
        dataset_path="d",
        output_dir="/o",
        event_log="e",
        rewards=[RewardSpec(name="format", builtin="format")],
        grpo=GRPOFields(**imported.config),
        extra=imported.extra,
        evaluation=EvalFields(**imported.evaluation),
        trainer=imported.trainer,
    )
    keys = overrides(config, train_file="t", val_file="v", reward_path="r", config_path="c", gpus=gpus, nnodes=nnodes)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = migrate_legacy_keys(compose("ppo_trainer", overrides=keys))
    return flatten(OmegaConf.to_container(cfg, resolve=True))


def _as_verl_reads(value):
    """A YAML 1.1 string such as '1e-6' as OmegaConf's FloatNode holds it."""
    try:
        return float(value) if isinstance(value, str) else value
    except ValueError:
        return value


def noted(imported, key: str) -> list[str]:
    return [n for n in imported.notes if key in n]


@pytest.mark.parametrize(
    "keys, where, expected",
    [
        (
            {"actor_rollout_ref__rollout__name": "sglang", "actor_rollout_ref__rollout__mode": "async"},
            "actor_rollout_ref.rollout.name",
            "sglang",
        ),
        ({"actor_rollout_ref__rollout__multi_turn__enable": True}, "actor_rollout_ref.rollout.multi_turn.enable", True),
        ({"actor_rollout_ref__actor__entropy_coeff": 0.001}, "actor_rollout_ref.actor.entropy_coeff", 0.001),
        ({"reward_model__reward_manager": "dapo"}, "reward.reward_manager.name", "dapo"),
        ({"reward__reward_manager__name": "dapo"}, "reward.reward_manager.name", "dapo"),
        (
            {"actor_rollout_ref__rollout__tensor_model_parallel_size": 2},
            "actor_rollout_ref.rollout.tensor_model_parallel_size",
            2,
        ),
        (
            {"actor_rollout_ref__actor__fsdp_config__param_offload": True},
            "actor_rollout_ref.actor.fsdp_config.param_offload",
            True,
        ),
        (
            {"actor_rollout_ref__actor__fsdp_config__optimizer_offload": True},
            "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
            True,
        ),
        (
            {"actor_rollout_ref__ref__fsdp_config__param_offload": True},
            "actor_rollout_ref.ref.fsdp_config.param_offload",
            True,
        ),
        ({"trainer__val_before_train": False, "trainer__test_freq": 5}, "trainer.val_before_train", False),
        ({"algorithm__use_kl_in_reward": True}, "algorithm.use_kl_in_reward", True),
        ({"actor_rollout_ref__actor__kl_loss_type": "mse"}, "actor_rollout_ref.actor.kl_loss_type", "mse"),
        ({"data__truncation": "right"}, "data.truncation", "right"),
        (
            {"actor_rollout_ref__actor__loss_agg_mode": "seq-mean-token-sum"},
            "actor_rollout_ref.actor.loss_agg_mode",
            "seq-mean-token-sum",
        ),
        ({"critic__optim__lr": 2e-5}, "critic.optim.lr", 2e-5),
    ],
)
def test_a_verl_key_reaches_verls_config_as_written(owner, dataset_version, keys, where, expected):
    imported = parse_run_yaml(with_keys(**keys), owner=owner)
    assert imported.errors == [] and imported.trainer == "verl"
    got = composed(imported)
    assert got[where] == expected, (where, got[where], imported.notes)


@pytest.mark.parametrize(
    "key, field",
    [
        ("actor_rollout_ref.actor.optim.weight_decay", "weight_decay"),
        ("actor_rollout_ref.actor.optim.lr_scheduler_type", "lr_scheduler_type"),
        ("data.max_response_length", "max_completion_length"),
        ("actor_rollout_ref.model.enable_gradient_checkpointing", "gradient_checkpointing"),
        ("actor_rollout_ref.rollout.gpu_memory_utilization", "vllm_gpu_memory_utilization"),
    ],
)
def test_a_left_out_key_takes_verls_own_default_and_says_so(owner, dataset_version, key, field):
    """weight_decay left out is verl's 0.01 (its optim config), not TRL's 0.0: in verl's composed config, in the run's
    field (so TRL, trained from the form, gets verl's value too), and in a note naming both."""
    default = verls_own_defaults()[key]
    imported = parse_run_yaml(with_keys(), owner=owner)
    assert imported.errors == []
    assert composed(imported)[key] == default
    assert imported.config[field] == default
    trl_default = getattr(GRPOFields(), field)
    if trl_default != default:
        assert any(f"{field} {default!r}" in n and repr(trl_default) in n for n in noted(imported, key)), imported.notes


@pytest.mark.parametrize(
    "key",
    [
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        "trainer.val_before_train",
        "data.truncation",
        "data.filter_overlong_prompts",
        "actor_rollout_ref.actor.kl_loss_type",
        "actor_rollout_ref.actor.entropy_coeff",
    ],
)
def test_a_left_out_key_grpo_web_sets_for_its_own_runs_is_verls_default_for_a_verl_file(owner, dataset_version, key):
    imported = parse_run_yaml(with_keys(), owner=owner)
    assert imported.errors == []
    assert composed(imported)[key] == verls_own_defaults()[key]


def test_trl_training_a_verl_file_refuses_each_verl_setting_it_has_no_equivalent_of(owner, dataset_version):
    imported = parse_run_yaml(
        with_keys(actor_rollout_ref__actor__entropy_coeff=0.001, actor_rollout_ref__rollout__name="sglang"),
        owner=owner,
    )
    assert imported.errors == []
    spec = RunSpec.from_imported(imported)
    import dataclasses

    as_trl = dataclasses.replace(spec, trainer="trl", requested_gpus=0)
    problems = spec_problems(as_trl, owner=owner, queue_anyway=True)
    for key, value in (
        ("actor_rollout_ref.actor.entropy_coeff", "0.001"),
        ("actor_rollout_ref.rollout.name", "sglang"),
    ):
        assert any(p.startswith(key) and value in p and "verl" in p for p in problems), problems
    # verl's defaults the import wrote down for the keys the file left out are not refused: TRL has its own
    assert not any(p.startswith("actor_rollout_ref.rollout.tensor_model_parallel_size") for p in problems), problems


def test_a_flat_verl_key_in_a_trl_config_is_refused_by_name(owner, dataset_version):
    text = "model_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [format]\n"
    imported = parse_run_yaml(text + "actor_rollout_ref.actor.entropy_coeff: 0.001\n", owner=owner)
    assert any(e.startswith("actor_rollout_ref.actor.entropy_coeff") and "trainer: verl" in e for e in imported.errors)


@pytest.mark.parametrize(
    "name",
    ["verl_run_qwen3-8b.sh", "verl_run_deepseek7b_llm.sh", "verl_run_qwen2-7b.sh", "verl_generated_ppo_trainer.yaml"],
)
def test_every_key_of_a_published_verl_script_reaches_verl_or_is_noted_or_refused(owner, name):
    """Each leaf key of a published verl launch script: in verl's composed config as the script wrote it, or a note
    (or an error) names the key. None is dropped in silence."""
    from omegaconf import OmegaConf as OC

    from tests.lifecycle.published_corpus import corpus_mapping, corpus_owner_setup

    corpus_owner_setup(owner)
    data = corpus_mapping(name)
    imported = parse_run_yaml(yaml.safe_dump(data, sort_keys=False), owner=owner)
    assert imported.errors == [], imported.errors
    flat = flatten({k: v for k, v in data.items() if k != "reward_funcs"})
    per_node = flat.get("trainer.n_gpus_per_node", 1)
    got = composed(imported, gpus=per_node, nnodes=flat.get("trainer.nnodes", 1))
    defaults = verls_own_defaults()
    silent = []
    for key, value in flat.items():
        want = OC.to_container(OC.create({"v": value}), resolve=True)["v"]
        if key in got and (got[key] == want or _as_verl_reads(want) == got[key]):
            continue
        if noted(imported, key) or any(key in e for e in imported.errors):
            continue
        if key not in got and key.startswith("reward_model.") and key in defaults and defaults[key] == want:
            continue  # verl's own null in an old reward section, which verl's own migration removes
        silent.append((key, value, got.get(key, "(absent)")))
    assert silent == [], silent


def test_a_verl_runs_carried_keys_survive_its_run_yaml(owner, dataset_version, tiny_model, monkeypatch):
    """The run made of a verl file keeps its carried keys, and its run YAML (the run page's download, a clone's
    source) reads back with the same ones, so the clone trains as the file said. A run is made of the tiny model, which
    this test builds (tiny_model) rather than finding it built by a test that ran before."""
    from runs.lifecycle.services import run_create
    from runs.lifecycle.trl_yaml import run_yaml

    monkeypatch.setattr("runs.lifecycle.services.capacity_problems", lambda **kw: [])
    import dataclasses

    text = with_keys(actor_rollout_ref__actor__entropy_coeff=0.001, reward_model__reward_manager="dapo")
    spec = RunSpec.from_imported(parse_run_yaml(text, owner=owner))
    builtin = [{"name": "digit_ratio", "weight": 1.0, "builtin": "digit_ratio"}]  # no sandbox check needed
    run = run_create(owner=owner, spec=dataclasses.replace(spec, rewards=builtin), queue_anyway=True)
    carried = {k: v for k, v in run.config_extra.items() if "." in k}
    assert carried["actor_rollout_ref.actor.entropy_coeff"] == 0.001
    assert carried["reward_model.reward_manager"] == "dapo"
    back = parse_run_yaml(run_yaml(run), owner=owner)
    assert back.errors == [] and back.trainer == "verl"
    assert {k: v for k, v in back.extra.items() if "." in k} == carried
    assert composed(back)["actor_rollout_ref.actor.entropy_coeff"] == 0.001
