"""Reads of the lifecycle capability: a running run's pace (steps per second, time left) and whether it has
stalled."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from runs.models import Run

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
    times = list(run.step_metrics.exclude(logged_at=None).order_by("-step").values_list("step", "logged_at")
                 [:RECENT_STEPS])
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
