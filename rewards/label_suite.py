"""Labels as a reward function's tests (issue 39, item 4). A function adopts the labeled rollouts of some runs as its
suite, each label name mapped to what the function should do on a rollout that carries it: score below (or above)
its group's mean, or at most (or at least) a value. The suite is checked by scoring each labeled rollout's whole group
with the function in the sandbox (workers.reward_checks), and by a reward replay (runs.rollouts.replay_labels).

Only the suite's form is here: which runs and labels a user may reach is decided where it is read."""

from __future__ import annotations

import math

EXPECTATIONS = {
    "below_mean": "scores below its group's mean",
    "above_mean": "scores above its group's mean",
    "at_most": "scores at most {value:g}",
    "at_least": "scores at least {value:g}",
}
WITH_VALUE = ("at_most", "at_least")
MAX_RUNS = 20
MAX_EXPECTATIONS = 20
MAX_CASES = 500  # labeled rollouts one check scores (each with its group)


class SuiteError(ValueError):
    pass


def clean_suite(data) -> dict:
    """{"runs": [run ids], "expectations": [{"label", "expect", "value"?}]} checked for form; SuiteError names the
    key. An empty suite ({}) is none."""
    if data in ({}, None):
        return {}
    if not isinstance(data, dict) or set(data) - {"runs", "expectations"}:
        raise SuiteError('the suite is {"runs": [run ids], "expectations": [{"label", "expect", "value"}]}')
    runs = data.get("runs")
    if not isinstance(runs, list) or not 1 <= len(runs) <= MAX_RUNS:
        raise SuiteError(f"runs: a list of 1 to {MAX_RUNS} run ids")
    if not all(isinstance(r, int) and not isinstance(r, bool) and 0 < r < 2**63 for r in runs):
        raise SuiteError("runs: run ids are whole numbers")
    expectations = data.get("expectations")
    if not isinstance(expectations, list) or not 1 <= len(expectations) <= MAX_EXPECTATIONS:
        raise SuiteError(f"expectations: a list of 1 to {MAX_EXPECTATIONS}")
    clean, seen = [], set()
    for n, e in enumerate(expectations):
        where = f"expectations[{n}]"
        if not isinstance(e, dict) or set(e) - {"label", "expect", "value"}:
            raise SuiteError(f"{where}: an object with label, expect and (for at_most, at_least) value")
        label = e.get("label")
        if not isinstance(label, str) or not label.strip() or len(label) > 64:
            raise SuiteError(f"{where}.label: a label name of 1 to 64 characters")
        label = " ".join(label.split())
        if label in seen:
            raise SuiteError(f"{where}.label: {label!r} is mapped twice")
        seen.add(label)
        expect = e.get("expect")
        if expect not in EXPECTATIONS:
            raise SuiteError(f"{where}.expect: one of {', '.join(EXPECTATIONS)}")
        out = {"label": label, "expect": expect}
        if expect in WITH_VALUE:
            value = e.get("value")
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise SuiteError(f"{where}.value: a finite number ({expect} needs one)")
            out["value"] = float(value)
        elif e.get("value") is not None:
            raise SuiteError(f"{where}.value: {expect} takes no value")
        clean.append(out)
    return {"runs": sorted(set(runs)), "expectations": clean}


def describe(expectation: dict) -> str:
    return f'"{expectation["label"]}": ' + EXPECTATIONS[expectation["expect"]].format(value=expectation.get("value", 0))


def met(expectation: dict, score: float | None, group_mean: float | None) -> bool:
    """Whether a labeled rollout's ``score`` meets ``expectation`` (its group's mean beside it). A function that
    abstained (None) meets none: the label says what it should have done."""
    if score is None:
        return False
    kind = expectation["expect"]
    if kind in WITH_VALUE:
        return score <= expectation["value"] if kind == "at_most" else score >= expectation["value"]
    if group_mean is None:
        return False
    return score < group_mean if kind == "below_mean" else score > group_mean


def mean(values) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None
