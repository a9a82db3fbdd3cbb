"""Fidelity: the training program's stored rollouts are TRL's own, configuration by configuration.

Each case trains the tiny model a few steps with TRL's ``log_completions`` on, stores the event log through the real
ingest, and compares every stored row with TRL's completions table of that step (prompt, completion, each reward
function's score, the advantage: bit for bit) and the step's stored figures with the metrics TRL logged for it
(clipped ratio, mean length). ``pytest -k fidelity`` selects them; one test per configuration."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.demo_data import arithmetic_rows
from grpo_web_protocol.events import read_events

from runs.models import Rollout, Run, StepMetric
from runs.rollouts.ingest import ingest_events
from runs.rollouts.selectors import batch_step, step_view
from workers.training.train import run as train

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::FutureWarning")]

# a reward that abstains (None) on every third completion: TRL leaves NaN in its table and 0 advantage when all abstain
SOMETIMES_NONE = """
def sometimes_none(completions, **kwargs):
    return [None if i % 3 == 0 else float(len(c) % 5) for i, c in enumerate(completions)]
"""

BASE = {
    "num_generations": 4,
    "per_device_train_batch_size": 8,
    "max_steps": 2,
    "max_completion_length": 12,
    "learning_rate": 1e-2,
    "seed": 11,
    "log_completions": True,
    "save_steps": 0,
    "gradient_checkpointing": False,
}


def trl_loss_types() -> list[str]:
    """The loss types the installed TRL documents for GRPOConfig.loss_type."""
    from trl import GRPOConfig

    help_text = next(f for f in dataclasses.fields(GRPOConfig) if f.name == "loss_type").metadata["help"]
    return re.findall(r"'(\w+)'", help_text.split("Supported values are", 1)[1].split(".", 1)[0])


CASES = {
    "default": {},
    "scale_rewards_group": {"scale_rewards": "group"},
    "scale_rewards_batch": {"scale_rewards": "batch"},
    "scale_rewards_none": {"scale_rewards": "none"},
    "normalize_then_sum": {"multi_objective_aggregation": "normalize_then_sum", "_rewards": "none"},
    "mask_truncated_completions": {"mask_truncated_completions": True},
    "steps_per_generation_2": {"steps_per_generation": 2, "max_steps": 4},
    "num_iterations_2": {"num_iterations": 2, "max_steps": 4},
    "gradient_accumulation_steps_2": {"gradient_accumulation_steps": 2, "max_steps": 1},
    "importance_sampling_sequence": {"importance_sampling_level": "sequence"},
    "reward_returning_none": {"_rewards": "none"},
    "several_eos_ids": {"_model": "several_eos"},
    **{
        f"loss_type_{name}": {"loss_type": name}
        for name in ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
    },
}


def test_the_cases_cover_every_loss_type_trl_offers():
    assert {c["loss_type"] for c in CASES.values() if "loss_type" in c} == set(trl_loss_types())
    assert set(GRPOFields.__dataclass_fields__["loss_type"].metadata["choices"]) == set(trl_loss_types())


@pytest.fixture(scope="session")
def several_eos_model(tiny_model, tmp_path_factory):
    """The tiny model declaring many EOS ids in its generation config, as Qwen2.5 and Llama-3 instruct models declare
    several: most completions end on one that is not the tokenizer's EOS."""
    path = tmp_path_factory.mktemp("several-eos") / "model"
    shutil.copytree(tiny_model, path)
    config = (
        json.loads((path / "generation_config.json").read_text()) if (path / "generation_config.json").exists() else {}
    )
    tokenizer = json.loads((path / "tokenizer_config.json").read_text())
    eos = config.get("eos_token_id")
    eos = eos if isinstance(eos, list) else [eos] if eos is not None else []
    config["eos_token_id"] = sorted(set(eos) | set(range(4, 40)))  # a band of common tokens ends completions
    (path / "generation_config.json").write_text(json.dumps(config))
    assert tokenizer  # the tokenizer itself is unchanged: its own eos_token_id is still the single one
    return path


def _train(tmp_path, model, case: dict):
    case = dict(case)
    rewards = [
        RewardSpec("digit_ratio", 1.0, builtin="digit_ratio"),
        RewardSpec("think_format", 0.5, builtin="think_format"),
    ]
    if case.pop("_rewards", None) == "none":
        rewards.append(RewardSpec("sometimes_none", 2.0, source=SOMETIMES_NONE, entrypoint="sometimes_none"))
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(64)))
    config = TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        rewards=rewards,
        grpo=GRPOFields(**{**BASE, **case}),
    )
    train(config)
    events, _ = read_events(config.event_log)
    return config, events, [r.name for r in rewards]


def _same(stored, trl) -> bool:
    """Bit for bit, with TRL's NaN (a function's None) as our None."""
    if stored is None or (isinstance(stored, float) and math.isnan(stored)):
        return trl is None or (isinstance(trl, float) and math.isnan(trl))
    return stored == trl


@pytest.mark.parametrize("name", CASES)
def test_fidelity(name, tmp_path, owner, dataset_version, tiny_model, request):
    case = dict(CASES[name])
    model = request.getfixturevalue("several_eos_model") if case.pop("_model", None) else tiny_model
    config, events, names = _train(tmp_path, model, case)
    run = Run.objects.create(
        owner=owner,
        name=name,
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": r.name, "weight": r.weight} for r in config.rewards],
        config=dataclasses.asdict(config.grpo),
        total_steps=config.grpo.max_steps,
    )
    ingest_events(run, events)
    metrics = {m.step: m.metrics for m in StepMetric.objects.filter(run=run)}
    tables = sorted(Path(config.output_dir, "completions").glob("completions_*.parquet"))
    assert len(tables) == config.grpo.max_steps
    for path in tables:
        step = int(path.stem.split("_")[1])
        table = pd.read_parquet(path)
        # a batch trained on at several steps is stored once, at the first; TRL's table repeats it at each
        rows = list(Rollout.objects.filter(run=run, step=batch_step(run, step)).order_by("index"))
        assert len(rows) == len(table), (step, len(rows), len(table))
        assert [r.prompt for r in rows] == list(table["prompt"])
        assert [r.completion for r in rows] == list(table["completion"])
        for k, fn in enumerate(names):
            assert all(_same(r.rewards[k], v) for r, v in zip(rows, table[fn].tolist())), (step, fn)
        assert [r.advantage for r in rows] == table["advantage"].tolist(), step
        logged = metrics[step]
        generated = "completions/clipped_ratio" in logged  # TRL logs the batch's figures at the step it generates it
        assert generated == (batch_step(run, step) == step)
        if generated:
            for k, fn in enumerate(names):  # the per-function panels: abstentions and time per call, per step
                nones = sum(r.rewards[k] is None for r in rows) / len(rows)
                assert logged[f"rewards/{fn}/none_frac"] == pytest.approx(nones)
                assert logged[f"rewards/{fn}/time_per_call_ms"] > 0
            assert sum(r.truncated for r in rows) / len(rows) == pytest.approx(logged["completions/clipped_ratio"])
            assert sum(r.length for r in rows) / len(rows) == pytest.approx(logged["completions/mean_length"])
        if (
            generated
            and config.grpo.scale_rewards != "batch"
            and config.grpo.multi_objective_aggregation == "sum_then_normalize"
        ):
            # TRL flags rows of zero-std groups; under batch scaling (or normalize_then_sum) it measures the batch
            assert sum(r.zero_std for r in rows) / len(rows) == pytest.approx(logged["frac_reward_zero_std"])
        # the run page's "by the formula" value beside each stored advantage is TRL's, up to float32 rounding
        view = step_view(run, step, groups=10_000)
        formula = {c["index"]: c["formula_advantage"] for g in view["groups"] for c in g["completions"]}
        assert [formula[r.index] for r in rows] == pytest.approx(table["advantage"].tolist(), abs=2e-4, rel=1e-4)
