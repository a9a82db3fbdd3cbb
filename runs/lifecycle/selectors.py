"""Reads of the lifecycle capability: a running run's pace (steps per second, time left) and whether it has
stalled; the dashboard's table of runs."""

from __future__ import annotations

import ast
import math
import statistics
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Avg, Case, F, FloatField, IntegerField, OuterRef, Q, Subquery, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone
from grpo_web_protocol.config import FROM_FILE, GRPO_WEB_DEFAULTS, kind_fields

from grpo_web.sharing import teams_of
from runs.models import Evaluation, Rollout, Run, StepMetric
from runs.paths import supervisor_alive, trainer_alive

RECENT_STEPS = 20  # the pace is measured over the last steps logged


@dataclass(frozen=True)
class Pace:
    steps_per_second: float | None
    eta_seconds: float | None  # None while stalled: a pace that no longer holds promises nothing
    stalled_seconds: float | None  # seconds since the last step, once past the stall limit; else None
    stall_limit_seconds: float | None


def run_pace(run: Run, now: datetime | None = None) -> Pace:
    """Steps per second over the last steps, the seconds left at that pace, and whether the run has stalled: running
    with no new step for max(10 x the median step time, GRPO_STALL_SECONDS). It clears by itself when a step comes."""
    times = list(
        run.step_metrics.exclude(logged_at=None).order_by("-step").values_list("step", "logged_at")[:RECENT_STEPS]
    )
    rate = left = None
    if len(times) >= 2:
        (last_step, last_at), (first_step, first_at) = times[0], times[-1]
        seconds = (last_at - first_at).total_seconds()
        if seconds > 0:
            rate = (last_step - first_step) / seconds
            left = max(0, run.total_steps - run.step) / rate if rate > 0 and not run.is_finished else None
    if run.status != Run.Status.RUNNING:
        return Pace(rate, left, None, None)
    step_seconds = [(a - b).total_seconds() / (sa - sb) for (sa, a), (sb, b) in zip(times, times[1:]) if sa > sb]
    limit = max(10 * statistics.median(step_seconds) if step_seconds else 0.0, settings.GRPO_STALL_SECONDS)
    # since the last step of this attempt (a resumed run's earlier steps are older than its start)
    since = max([t for t in (times[0][1] if times else None, run.started_at) if t is not None], default=None)
    idle = ((now or timezone.now()) - since).total_seconds() if since else 0.0
    if idle > limit:
        return Pace(rate, None, idle, limit)
    return Pace(rate, left, None, limit)


@dataclass(frozen=True)
class Silence:
    seconds: float  # since the supervisor's last heartbeat
    trainer_alive: bool | None  # whether something still holds the run's folder (None: this machine cannot tell)


def run_silence(run: Run, now: datetime | None = None) -> Silence | None:
    """A running run whose supervisor has written no heartbeat for Run.SILENT_SECONDS: a killed worker (its trainer
    dies with it) or a paused or stuck one (its trainer may train on). None while it beats, or when not running."""
    if run.status != Run.Status.RUNNING or run.heartbeat_at is None:
        return None
    seconds = ((now or timezone.now()) - run.heartbeat_at).total_seconds()
    return Silence(seconds, trainer_alive(run)) if seconds > Run.SILENT_SECONDS else None


@dataclass(frozen=True)
class Liveness:
    step_age_seconds: float | None  # since the supervisor last reported, once past Run.STALE_SECONDS: the step shown
    # is as of then (its supervisor ingests nothing while paused, busy or dead)
    worker_lost: bool  # the supervisor's process is gone (its lock is free) and nothing recorded how the run ended


def run_liveness(run: Run, now: datetime | None = None) -> Liveness:
    """How far a running run's page may be believed. A supervisor beats every second, so a step older than three
    beats is shown with its age; a supervisor whose process has died (runs.paths.supervisor_alive) is known at once,
    and the run is shown lost until a live worker's reaper settles it from its log. ``run`` is read again when its
    supervisor's lock is free, since one that recorded an outcome lets go of it just after."""
    if run.status != Run.Status.RUNNING:
        return Liveness(None, False)
    lost = supervisor_alive(run) is False
    if lost:
        run.refresh_from_db()  # ended just now (its supervisor recorded it, then let go), or lost
        lost = run.status == Run.Status.RUNNING
    if run.status != Run.Status.RUNNING or run.heartbeat_at is None:
        return Liveness(None, False)
    age = ((now or timezone.now()) - run.heartbeat_at).total_seconds()
    return Liveness(age if age > Run.STALE_SECONDS or lost else None, lost)


# --- the dashboard's runs table ----------------------------------------------------------------------------------

SORTS = {  # ?sort= value -> ordering; a leading "-" in the value reverses it
    "created": ("created_at",),
    "name": ("name",),
    "status": ("status",),
    "progress": ("progress_share",),
    "reward": ("latest_reward",),
    "mean_at_k": ("latest_mean_at_k",),
    "dataset": ("dataset_version__dataset__name",),
}
SPARK_POINTS = 40


@dataclass(frozen=True)
class RunRow:
    run: Run
    reward: float | None  # the newest reward: logged, or the newest rollout batch's mean when that is newer
    mean_at_k: float | None  # the latest evaluation's mean@k
    spark: str  # the reward curve as SVG polyline points in a 100 x 20 box; "" with fewer than two steps


@dataclass(frozen=True)
class RunTable:
    rows: list[RunRow]
    total: int
    statuses: list[str]
    datasets: list[tuple[int, str]]
    models: list[str]
    teams: list[tuple[int, str]]


def dashboard_runs(
    owner,
    *,
    q: str = "",
    status: str = "",
    dataset: str = "",
    model: str = "",
    scope: str = "",
    team: str = "",
    sort: str = "-created",
    limit: int = 200,
) -> RunTable:
    """The runs ``owner`` may see (theirs and those their teams share), searched (name, model, dataset, tags, notes), filtered
    (``scope``: mine or shared; ``team``: shared with that team of theirs) and sorted, with the latest reward, the
    latest mean@k and a sparkline of the reward. Unknown filter or sort values are ignored, never an error."""
    mine = Run.objects.visible_to(owner)
    runs = mine.select_related("dataset_version__dataset", "owner")
    if scope == "mine":
        runs = runs.filter(owner=owner)
    elif scope == "shared":
        runs = runs.exclude(owner=owner)
    if team.isdigit():
        runs = runs.filter(shares__team_id=int(team), shares__team__user=owner)
    if q:
        runs = runs.filter(
            Q(name__icontains=q)
            | Q(model__icontains=q)
            | Q(dataset_version__dataset__name__icontains=q)
            | Q(tags__icontains=q)
            | Q(notes__icontains=q)
        )
    if status in Run.Status.values:
        runs = runs.filter(status=status)
    if dataset.isdigit():
        runs = runs.filter(dataset_version__dataset_id=int(dataset))
    if model:
        runs = runs.filter(model=model)
    # the newest reward of any kind (as rollouts.selectors.latest_reward): the last logged one, or the mean of the
    # newest rollout batch when it is newer (metrics logged every 10 steps, a batch stored every step)
    logged = StepMetric.objects.filter(run=OuterRef("pk"), metrics__has_key="reward").order_by("-step")
    runs = runs.annotate(
        logged_step=Subquery(logged.values("step")[:1], output_field=IntegerField()),
        batch_step=Subquery(
            Rollout.objects.filter(run=OuterRef("pk")).order_by("-step").values("step")[:1],
            output_field=IntegerField(),
        ),
    )
    batch_mean = (
        Rollout.objects.filter(run=OuterRef("pk"), step=OuterRef("batch_step"))
        .values("run")
        .annotate(value=Avg("reward"))
        .values("value")
    )
    logged_value = Subquery(
        logged.annotate(value=Cast(KeyTextTransform("reward", "metrics"), FloatField())).values("value")[:1],
        output_field=FloatField(),
    )
    latest_reward = Case(
        When(
            batch_step__gt=Coalesce(F("logged_step"), Value(-1)),
            then=Coalesce(Subquery(batch_mean, output_field=FloatField()), logged_value),
        ),
        default=logged_value,
        output_field=FloatField(),
    )
    latest_mean = (
        Evaluation.objects.filter(run=OuterRef("pk"), status=Evaluation.Status.COMPLETED)
        .order_by("-finished_at")
        .annotate(value=Cast(KeyTextTransform("mean@k", "metrics"), FloatField()))
        .values("value")[:1]
    )
    runs = runs.annotate(
        latest_reward=latest_reward,
        latest_mean_at_k=Subquery(latest_mean, output_field=FloatField()),
        progress_share=Case(
            When(total_steps__gt=0, then=F("step") * 1.0 / F("total_steps")),
            default=Value(0.0),
            output_field=FloatField(),
        ),
    )
    key = sort.lstrip("-")
    fields = SORTS.get(key, SORTS["created"])
    descending = sort.startswith("-") if key in SORTS else True
    runs = runs.order_by(
        *[F(f).desc(nulls_last=True) if descending else F(f).asc(nulls_last=True) for f in fields], "-pk"
    )
    total = runs.count()
    page = list(runs[:limit])
    curves: dict[int, list[tuple[int, float]]] = {run.pk: [] for run in page}
    for run_id, step, value in (
        StepMetric.objects.filter(run__in=page)
        .order_by("run_id", "step")
        .annotate(value=Cast(KeyTextTransform("reward", "metrics"), FloatField()))
        .values_list("run_id", "step", "value")
    ):
        if value is not None and math.isfinite(value):
            curves[run_id].append((step, value))
    return RunTable(
        rows=[RunRow(run, run.latest_reward, run.latest_mean_at_k, sparkline(curves[run.pk])) for run in page],
        total=total,
        statuses=list(Run.Status.values),
        teams=[(t.pk, t.name) for t in teams_of(owner)],
        datasets=sorted(
            {
                (r.dataset_version.dataset_id, r.dataset_version.dataset.name)
                for r in mine.select_related("dataset_version__dataset")
                if r.dataset_version_id  # a run trained elsewhere has only the name its source reported
            },
            key=lambda d: d[1],
        ),
        models=sorted(set(mine.values_list("model", flat=True))),
    )


def sparkline(points: list[tuple[int, float]]) -> str:
    """SVG polyline points (x 0..100 by step, y 0..20 by value, higher is up) of at most SPARK_POINTS points."""
    if len(points) < 2:
        return ""
    if len(points) > SPARK_POINTS:
        stride = len(points) / SPARK_POINTS
        points = [points[int(i * stride)] for i in range(SPARK_POINTS - 1)] + [points[-1]]
    (x0, _), (x1, _) = points[0], points[-1]
    low, high = min(v for _, v in points), max(v for _, v in points)
    span_x, span_y = (x1 - x0) or 1, (high - low) or 1
    return " ".join(f"{100 * (x - x0) / span_x:.1f},{20 - 18 * (v - low) / span_y - 1:.1f}" for x, v in points)


# --- the log tail, readable -----------------------------------------------------------------------------------------

MAX_DICT_LINE = 20_000  # longer "{...}" lines stay text: reading them is not worth it
LOGGED_SHOWN = 5  # logged metric dicts shown side by side, the latest last


def log_view(text: str, step_metrics=()) -> dict:
    """The log tail made readable: TRL's logged metric dicts (lines like ``{'loss': 0.01, 'reward': 0.5}``) as one
    table, a metric a row and a logged line a column (the last LOGGED_SHOWN), and every other line as it is.
    Lines are read as Python literals only (ast.literal_eval), never run.

    A logged line does not say its step; ``step_metrics`` (the run's latest (step, metrics) rows, as ingested from
    the same logs) does: each column's step is the latest one whose metrics hold that line's values ("steps", None
    where none does)."""
    logged, other = [], []
    for line in text.splitlines():
        stripped = line.strip()
        values = None
        if stripped.startswith("{") and stripped.endswith("}") and len(stripped) <= MAX_DICT_LINE:
            try:
                values = ast.literal_eval(stripped)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                values = None
        if isinstance(values, dict) and values and all(isinstance(k, str) and _loggable(v) for k, v in values.items()):
            logged.append(values)
        else:
            other.append(line)
    shown = logged[-LOGGED_SHOWN:]
    names = list(dict.fromkeys(name for values in shown for name in values))
    return {
        "logged": len(logged),
        "steps": _logged_steps(shown, sorted(step_metrics, key=lambda row: row[0], reverse=True)),
        "metrics": [[name, [values.get(name) for values in shown]] for name in names],
        "text": "\n".join(other),
    }


def _logged_steps(shown: list[dict], rows: list[tuple[int, dict]]) -> list[int | None]:
    """Each logged line's step, latest line first, no later than the step found for the line after it."""
    steps: list[int | None] = []
    below = None  # the step of the next line logged: an earlier line is at that step or before
    for values in reversed(shown):
        step = next(
            (
                s
                for s, m in rows
                if (below is None or s <= below) and all(_same(v, m.get(k, _MISSING)) for k, v in values.items())
            ),
            None,
        )
        steps.append(step)
        below = step if step is not None else below
    return steps[::-1]


_MISSING = object()


def _same(printed, stored) -> bool:
    """A printed value and the stored one: transformers prints floats as text with 4 significant digits."""
    if stored is _MISSING:
        return False
    if isinstance(printed, str) and isinstance(stored, (int, float)) and not isinstance(stored, bool):
        return printed == f"{stored:.4g}" or printed == str(stored)
    if isinstance(printed, (int, float)) and isinstance(stored, (int, float)):
        return math.isclose(printed, stored, rel_tol=1e-9, abs_tol=0.0)
    return printed == stored


def _loggable(value) -> bool:
    return (
        value is None
        or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
        or (isinstance(value, str) and len(value) <= 60)
    )


@dataclass(frozen=True)
class ConfigRow:
    name: str
    value: object
    source: str  # config.SOURCES; "" for a run made before sources were kept
    why: str  # a grpo-web default: why it is grpo-web's


def config_rows(run: Run) -> list[ConfigRow]:
    """The run's config, field by field in the form's order, then the fields passed through to TRL: each value with
    where it came from (the file, the form, the trainer's default or grpo-web's)."""
    sources = run.config_sources or {}
    names = [n for n in kind_fields(run.kind) if n in run.config] + [
        n for n in run.config if n not in kind_fields(run.kind)
    ]
    rows = [
        ConfigRow(
            n, run.config[n], sources.get(n, ""), GRPO_WEB_DEFAULTS.get(n, "") if sources.get(n) == "grpo-web" else ""
        )
        for n in names
    ]
    return rows + [ConfigRow(n, v, FROM_FILE if sources else "", "") for n, v in (run.config_extra or {}).items()]
