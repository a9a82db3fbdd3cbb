"""Reads behind the comparison page: overlaid metric curves, shared prompts side by side, and where runs disagree.

Prompts are matched across runs by their text (``Rollout.prompt``), so runs on different datasets compare on the
prompts they share. Everything is read from the database as it stands, so a run still training compares as far as it
has got; the page refreshes when the runs push new steps.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from django.db.models import Count, Max, Min, Q

from runs.models import Rollout, Run, StepMetric
from runs.rollouts.criteria import TOTAL, Criterion
from runs.rollouts.selectors import smooth_ema, step_groups
from runs.series import DEFAULT_BUCKETS, MAX_BUCKETS, numeric_keys, step_buckets

MIN_RUNS, MAX_RUNS = 2, 6
REFLECTION_RATE = "reflection_rate"  # not logged by TRL: the share of a step's completions with a reflection phrase
X_AXES = {"step": "step", "time": "wall time (seconds since the run started)"}
DISAGREEMENTS_SHOWN = 50
PREVIEW_CHARS = 160


class CompareError(ValueError):
    """A query parameter the comparison cannot use; the message names it."""


@dataclass(frozen=True)
class CompareParams:
    """The comparison's state, as its shareable URL holds it."""

    metric: str = TOTAL
    smooth: float = 0.6
    x: str = "step"
    prompt: str = ""  # a prompt's hash (see prompt_hash)
    step: int | None = None  # None: the latest step
    solved_by: str = ""  # "" picks the default for the runs (see criterion_for)
    threshold: float = 1.0
    first: int | None = None  # the curves' step range (x=step): None is the runs' first and last step
    last: int | None = None
    buckets: int = DEFAULT_BUCKETS

    @classmethod
    def parse(cls, query) -> "CompareParams":
        d = cls()
        smooth = _number(query.get("smooth"), "smooth", d.smooth)
        if not 0 <= smooth < 1:
            raise CompareError("smooth: give a weight from 0 (none) up to, not including, 1")
        x = query.get("x") or d.x
        if x not in X_AXES:
            raise CompareError(f"x: give one of {', '.join(X_AXES)}")
        step = query.get("step") or None
        if step is not None and not step.isdigit():
            raise CompareError("step: give a step number")
        bounds = {}
        for name in ("from", "to", "buckets"):
            raw = query.get(name) or ""
            if raw and not (raw.isdigit() and len(raw) <= 10 and int(raw) < 2**31):
                raise CompareError(f"{name}: give a whole number from 0 to 2147483647")
            bounds[name] = int(raw) if raw else None
        buckets = d.buckets if bounds["buckets"] is None else bounds["buckets"]
        if not 1 <= buckets <= MAX_BUCKETS:
            raise CompareError(f"buckets: give 1 to {MAX_BUCKETS}")
        return cls(
            first=bounds["from"],
            last=bounds["to"],
            buckets=buckets,
            metric=query.get("metric") or d.metric,
            smooth=smooth,
            x=x,
            prompt=query.get("prompt", "")[:64],
            step=int(step) if step is not None else None,
            solved_by=query.get("solved_by", ""),
            threshold=_number(query.get("threshold"), "threshold", d.threshold),
        )


def _number(value: str | None, name: str, default: float) -> float:
    if value in (None, ""):
        return default
    try:
        number = float(value)
    except ValueError:
        raise CompareError(f"{name}: '{value[:20]}' is not a number") from None
    if not math.isfinite(number):
        raise CompareError(f"{name}: give a finite number")
    return number


def parse_run_ids(values: list[str]) -> list[int]:
    """Run ids from ``runs=3,5`` (or ``runs=3&runs=5``), in order, without repeats."""
    ids: list[int] = []
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit():
                raise CompareError(f"runs: '{part[:20]}' is not a run id")
            if int(part) not in ids:
                ids.append(int(part))
    if not MIN_RUNS <= len(ids) <= MAX_RUNS:
        raise CompareError(f"runs: pick {MIN_RUNS} to {MAX_RUNS} runs to compare (got {len(ids)})")
    return ids


# --- metric curves ----------------------------------------------------------------------------------------------


def metric_names(runs: list[Run], logged: set[str] = frozenset()) -> list[str]:
    """The metrics a comparison offers: the usual ones first, then whatever else TRL logged."""
    rewards: dict[str, None] = {}
    for run in runs:
        rewards.update((f"rewards/{name}/mean", None) for name in run.reward_names)
    names = [TOTAL, *rewards, "kl", "entropy", "completions/mean_length", REFLECTION_RATE]
    return names + sorted(logged - set(names))


def metric_curves(
    runs: list[Run], metric: str, *, smooth: float, x: str, first=None, last=None, buckets: int = DEFAULT_BUCKETS
) -> dict:
    """One curve per run: x (step, or seconds since the run started), the logged values and the smoothed ones. By
    step, each curve is bucketed in the database (runs.series.step_buckets) over ``first``..``last`` (all the runs'
    steps where not given): "y" the buckets' last values, "min" and "max" their band."""
    logged = set()
    for run in runs:
        logged.update(numeric_keys(run.step_metrics.all(), nulls=False))
    if x == "step" and metric != REFLECTION_RATE:
        span = StepMetric.objects.filter(run__in=runs).aggregate(first=Min("step"), last=Max("step"))
        first = span["first"] if first is None else first
        last = span["last"] if last is None else last
    curves = []
    for run in runs:
        if x == "step" and metric != REFLECTION_RATE:
            if first is None or last is None or last < first:
                b = {"step": [], "last": [], "min": [], "max": [], "exact": True}
            else:
                b = step_buckets(run.step_metrics.all(), metric, first=first, last=last, buckets=buckets)
            xs, ys = b["step"], b["last"]
            extra = {"min": b["min"], "max": b["max"], "exact": b["exact"]}
        else:
            xs, ys = _curve_points(run, metric, x)
            extra = {"min": ys, "max": ys, "exact": True}
        curves.append({**_run_head(run), "x": xs, "y": ys, "smoothed": smooth_ema(ys, smooth), **extra})
    return {
        "metric": metric,
        "x": x,
        "x_title": X_AXES[x],
        "smooth": smooth,
        "available": metric_names(runs, logged),
        "runs": curves,
        "from": first,
        "to": last,
    }


def _curve_points(run: Run, metric: str, x: str) -> tuple[list, list]:
    """Every point of one run's curve (the reflection rate, or by time): (xs, ys)."""
    rows = list(run.step_metrics.order_by("step").values_list("step", "logged_at", "metrics"))
    if metric == REFLECTION_RATE:
        logged_at = {step: at for step, at, _ in rows}
        points = [(step, logged_at.get(step), rate) for step, rate in _reflection_rates(run)]
    else:
        points = [(step, at, _finite(metrics.get(metric))) for step, at, metrics in rows]
        points = [p for p in points if p[2] is not None]
    if x == "time":
        # from the run's start (model loading included); a resumed run keeps its first start
        starts = [t for t in [run.started_at, *(at for _, at, _ in rows)] if t is not None]
        t0 = min(starts) if starts else None
        points = [p for p in points if p[1] is not None]
        xs = [round((at - t0).total_seconds(), 3) for _, at, _ in points]
    else:
        xs = [step for step, _, _ in points]
    return xs, [value for _, _, value in points]


def _finite(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None  # NaN and infinities are not JSON, and not a point on a chart
    return float(value)


def _reflection_rates(run: Run) -> list[tuple[int, float]]:
    rows = (
        run.rollouts.order_by()
        .values("step")
        .annotate(n=Count("id"), reflective=Count("id", filter=~Q(reflections=[])))
        .order_by("step")
    )
    return [(r["step"], r["reflective"] / r["n"]) for r in rows]


def _run_head(run: Run) -> dict:
    return {
        "id": run.pk,
        "name": run.name,
        "status": run.status,
        "finished": run.is_finished,
        "step": run.step,
        "total_steps": run.total_steps,
    }


# --- prompts ----------------------------------------------------------------------------------------------------


def prompt_hash(text: str) -> str:
    """A short stable name for a prompt's text, for URLs."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _prompt_counts(run: Run, criterion: Criterion) -> dict[str, tuple[int, int, int]]:
    """prompt -> (completions, completions that solve it, last step it was sampled)."""
    rows = (
        run.rollouts.order_by()
        .values("prompt")
        .annotate(n=Count("id"), solved=Count("id", filter=criterion.q(run)), last=Max("step"))
    )
    return {r["prompt"]: (r["n"], r["solved"], r["last"]) for r in rows}


def prompt_comparison(runs: list[Run], criterion: Criterion, *, limit: int = DISAGREEMENTS_SHOWN) -> dict:
    """The prompts every run sampled, and those on which their solve rates differ most.

    ``disagreements`` rows: ``{"hash", "prompt", "spread", "runs": [{"id", "n", "solved", "rate"}]}``, spread being
    the highest solve rate minus the lowest; only rows with a spread above 0, largest first."""
    counts = [_prompt_counts(run, criterion) for run in runs]
    shared = set(counts[0]).intersection(*counts[1:])
    rows = []
    for prompt in shared:
        per_run = []
        for run, c in zip(runs, counts):
            n, solved, _ = c[prompt]
            per_run.append({"id": run.pk, "n": n, "solved": solved, "rate": solved / n})
        rates = [r["rate"] for r in per_run]
        rows.append(
            {
                "hash": prompt_hash(prompt),
                "prompt": prompt,
                "spread": max(rates) - min(rates),
                "runs": per_run,
                "last": max(c[prompt][2] for c in counts),
            }
        )
    disagreements = sorted(
        (r for r in rows if r["spread"] > 0), key=lambda r: (-r["spread"], -sum(x["n"] for x in r["runs"]), r["prompt"])
    )[:limit]
    return {
        "criterion": criterion.as_dict(),
        "runs": [_run_head(run) | {"prompts": len(c)} for run, c in zip(runs, counts)],
        "shared": [
            {"hash": r["hash"], "preview": _preview(r["prompt"]), "last_step": r["last"]}
            for r in sorted(rows, key=lambda r: r["prompt"])
        ],
        "disagreements": [{k: r[k] for k in ("hash", "prompt", "spread", "runs")} for r in disagreements],
    }


def _preview(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def find_prompt(runs: list[Run], key: str) -> str | None:
    """The prompt text whose hash is ``key``, among the prompts any of the runs sampled."""
    if not key:
        return None
    for run in runs:
        for text in run.rollouts.order_by().values_list("prompt", flat=True).distinct():
            if prompt_hash(text) == key:
                return text
    return None


def side_by_side(runs: list[Run], prompt: str, step: int | None, criterion: Criterion) -> dict:
    """Each run's completions of one prompt at one step, in columns.

    The step is one clock for all runs: each column shows the run's group of that prompt at the step, or, where the
    run did not sample the prompt then, at the last step before it that it did (``shown_step``; None if never by
    then). ``steps`` lists every step at which any run sampled the prompt, to step through in sync."""
    seen: dict[int, list[int]] = {run.pk: [] for run in runs}
    for run_id, s in (
        Rollout.objects.filter(run__in=runs, prompt=prompt).order_by("step").values_list("run_id", "step").distinct()
    ):
        seen[run_id].append(s)
    steps = sorted({s for ss in seen.values() for s in ss})
    if step is None:
        step = steps[-1] if steps else 0
    columns = []
    for run in runs:
        shown = max((s for s in seen[run.pk] if s <= step), default=None)
        groups = [g for g in step_groups(run, shown) if g["prompt"] == prompt] if shown is not None else []
        for g in groups:
            g.pop("prompt")
            for c in g["completions"]:
                c["solved"] = criterion.solves(c)
        columns.append(
            {
                **_run_head(run),
                "reward_names": run.reward_names,
                "scale_rewards": (run.config or {}).get("scale_rewards"),
                "steps": seen[run.pk],
                "shown_step": shown,
                "groups": groups,
            }
        )
    return {
        "prompt": {"hash": prompt_hash(prompt), "text": prompt},
        "step": step,
        "steps": steps,
        "criterion": criterion.as_dict(),
        "runs": columns,
    }
