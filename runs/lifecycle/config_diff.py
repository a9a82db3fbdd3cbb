"""What differs between the setups of runs: model, dataset version, reward versions and weights, GRPOConfig fields.

Used by the comparison page (any number of runs) and by clones (a run against its parent). Values are compared as a
run trained with them: a GRPOConfig field a run's stored config lacks (saved before the field existed) counts as its
default, which is what the training program used.
"""

from __future__ import annotations

import dataclasses
import json

from grpo_web_protocol.config import EVAL_FIELDS, GRPO_FIELDS

from rewards.models import RewardFunctionVersion
from runs.lifecycle.provenance import compared_fields
from runs.models import Run

MISSING = None  # the value of a reward a run does not use, or of an extra config field it does not set


def config_diff(run_a: Run, run_b: Run) -> list[dict]:
    """The fields whose value differs between two runs, in display order:
    ``[{"field": str, "kind": "model" | "dataset" | "reward" | "config", "a": value, "b": value}]``.

    ``field`` is ``model``, ``dataset_version``, ``<reward name> version``, ``<reward name> weight`` or a GRPOConfig
    field name. Values are what a page shows: the model id, ``"<dataset> v<number>"``, ``"v<number>"``, the weight, the
    config value; ``None`` where a run does not use that reward (or lacks an extra config field)."""
    return [
        {"field": row["field"], "kind": row["kind"], "a": row["values"][0], "b": row["values"][1]}
        for row in config_table([run_a, run_b])
    ]


def config_table(runs: list[Run], *, provenance: bool = False) -> list[dict]:
    """Like :func:`config_diff` for any number of runs: ``[{"field", "kind", "values": [one per run]}]``, only the
    rows where the runs do not all agree. ``provenance``: the reproducibility records' library versions, CUDA, driver
    and commits too (kind "provenance", after the config), where the runs that have a record disagree ("not
    recorded" for a run without one)."""
    rows: dict[str, dict] = {}
    setups = [_setup(run) for run in runs]
    if provenance and any(run.provenance for run in runs):
        for run, setup in zip(runs, setups):
            fields = compared_fields(run.provenance)
            setup.update({label: ("provenance", value, value) for label, value in fields.items()})
    for i, setup in enumerate(setups):
        for field, (kind, key, shown) in setup.items():
            row = rows.setdefault(
                field, {"field": field, "kind": kind, "keys": [MISSING] * len(runs), "values": [MISSING] * len(runs)}
            )
            row["keys"][i], row["values"][i] = key, shown
    order = {"model": 0, "dataset": 1, "reward": 2, "config": 3, "provenance": 4}
    recorded = [bool(run.provenance) for run in runs]
    differing = [row for row in rows.values() if len(set(map(_hashable, _compared(row, recorded)))) > 1]
    for row in differing:
        if row["kind"] == "provenance":  # a library one record lacks was not installed; a run with none has no record
            row["values"] = [
                v if v is not None else "not installed" if run.provenance else "not recorded"
                for v, run in zip(row["values"], runs)
            ]
    differing.sort(key=lambda row: order[row["kind"]])  # stable: fields keep their order within a kind
    return [{"field": row["field"], "kind": row["kind"], "values": row["values"]} for row in differing]


def _compared(row: dict, recorded: list[bool]) -> list:
    """A row's keys that decide whether it differs: a reproducibility record's rows among the runs that have one (a
    run still queued, or from before records were kept, is "not recorded", not a difference)."""
    if row["kind"] != "provenance":
        return row["keys"]
    return [key for key, has in zip(row["keys"], recorded) if has]


def _setup(run: Run) -> dict[str, tuple[str, object, object]]:
    """field -> (kind, what is compared, what is shown)."""
    dv = run.dataset_version
    fields: dict[str, tuple[str, object, object]] = {
        "model": ("model", run.model, run.model),
        # two datasets may share a name: the version's id decides, the name and number are what people read
        "dataset_version": ("dataset", dv.pk, f"{dv.dataset.name} v{dv.number}")
        if dv
        else ("dataset", ("reported", run.dataset_label), run.dataset_label or "not reported"),
    }
    numbers = _version_numbers(run.rewards)
    for reward in run.rewards:
        name = reward["name"]
        version = reward.get("version") or numbers.get(reward.get("version_id"))
        if version is not None:
            key, shown = (reward.get("version_id"), version), f"v{version}"
        else:  # a built-in (tests, benchmarks): trusted library code, named by its function
            key = shown = f"built-in {reward.get('builtin') or name}"
        fields[f"{name} version"] = ("reward", key, shown)
        fields[f"{name} weight"] = ("reward", float(reward.get("weight", 1.0)), reward.get("weight", 1.0))
    config = run.config or {}
    for name, f in GRPO_FIELDS.items():
        value = config.get(name, _default(f))
        fields[name] = ("config", value, value)
    evaluation = getattr(run, "evaluation", None) or {}
    for name, f in EVAL_FIELDS.items():
        value = evaluation.get(name, _default(f))
        fields[name] = ("config", value, value)
    extra = {**(getattr(run, "config_extra", None) or {}), **{k: v for k, v in config.items() if k not in GRPO_FIELDS}}
    for name in sorted(extra):
        fields[name] = ("config", extra[name], extra[name])
    return fields


def _version_numbers(rewards: list[dict]) -> dict[int, int]:
    """Version numbers of the pinned versions a run's rewards JSON does not spell out (runs saved before it did)."""
    ids = [r["version_id"] for r in rewards if r.get("version_id") and not r.get("version")]
    if not ids:
        return {}
    return dict(RewardFunctionVersion.objects.filter(pk__in=ids).values_list("pk", "number"))


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return MISSING


def _hashable(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, default=str)
    return value
