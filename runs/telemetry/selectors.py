"""Reads of the telemetry capability: a run's resource series and its step time split, thinned for the page."""

from __future__ import annotations

import math

from django.db.models import F, Max, QuerySet, Window
from django.db.models.functions import RowNumber

from runs.models import Run
from runs.telemetry.sampler import MB

MAX_POINTS = 2000  # per series sent to the page; longer runs are thinned in the database


TIMING_PARTS = ("generation_s", "reward_s", "update_s", "eval_s")


def _thinned(rows: QuerySet, order: str) -> QuerySet:
    """At most MAX_POINTS of ``rows``: every k-th by ``order``, the last one kept, picked in the database."""
    count = rows.count()
    if count <= MAX_POINTS:
        return rows
    stride = math.ceil(count / MAX_POINTS)
    return (
        rows.annotate(nth=Window(RowNumber(), order_by=F(order).asc()))
        .annotate(skip=(count - F("nth")) % stride)
        .filter(skip=0)
    )


def _share(part: list, total: float) -> float | None:
    return sum(v or 0.0 for v in part) / total if total > 0 else None


def telemetry_series(run: Run) -> dict:
    """The run page's resource charts: the samples over time (seconds since the run's first start), the time split
    of each trained step, and a summary (each part's share of the time, peak RSS, tokens per second)."""
    samples = list(
        _thinned(run.resource_samples.all(), "at").values_list("at", "step", "cpu_percent", "rss_bytes", "gpus")
    )
    origin = min(run.started_at or samples[0][0], samples[0][0]) if samples else None
    gpus: dict[str, dict] = {}  # by the GPU's name on the page: its index, and a Ray run's GPUs their node's name too
    for i, (*_, devices) in enumerate(samples):
        for d in devices:
            name = f"{d['index']} on {d['node']}" if d.get("node") else str(d["index"])
            gpu = gpus.setdefault(
                name, {"util": [None] * len(samples), "mem_used_mb": [None] * len(samples), "mem_total_mb": None}
            )
            gpu["util"][i] = d["util"]
            gpu["mem_used_mb"][i] = None if d["mem_used"] is None else d["mem_used"] / MB
            gpu["mem_total_mb"] = None if d["mem_total"] is None else d["mem_total"] / MB

    fields = ("step_s", *TIMING_PARTS, "tokens_per_s")
    steps = list(
        _thinned(run.step_metrics.filter(metrics__has_key="timing/step_s"), "step").values_list(
            "step", *(f"metrics__timing/{k}" for k in fields)
        )
    )
    timing = {"steps": [s[0] for s in steps], **{k: [s[i] for s in steps] for i, k in enumerate(fields, 1)}}
    total = sum(sum(v or 0.0 for v in timing[k]) for k in TIMING_PARTS)
    tokens = sum((tps or 0.0) * (s or 0.0) for tps, s in zip(timing["tokens_per_s"], timing["step_s"]))
    step_time = sum(s or 0.0 for s in timing["step_s"])
    peak = run.resource_samples.aggregate(peak=Max("rss_bytes"))["peak"]
    return {
        "finished": run.is_finished,
        "samples": {
            "t": [(at - origin).total_seconds() for at, *_ in samples],
            "step": [s[1] for s in samples],
            "cpu_percent": [s[2] for s in samples],
            "rss_mb": [s[3] / MB for s in samples],
            "gpus": gpus,
        },
        "timing": timing,
        "summary": {
            **{f"{k.removesuffix('_s')}_share": _share(timing[k], total) for k in TIMING_PARTS},
            "peak_rss_mb": None if peak is None else peak / MB,
            "tokens_per_s": tokens / step_time if step_time > 0 else None,
        },
    }
