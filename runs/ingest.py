"""Event log -> database. Idempotent: rollouts are keyed (run, step, index) and metrics (run, step), so reading the
same events twice (a supervisor restart, a resumed run) never duplicates a row."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from django.db import transaction

from runs.models import Rollout, Run, StepMetric
from runs.reflection import find_reflections
from workers.events import read_events


def _text(value) -> str:
    """Prompts and completions are strings, or message lists in TRL's conversational format.

    Model output can hold NUL characters, which PostgreSQL text cannot store: they become U+2400 (a visible NUL).
    """
    if isinstance(value, list):
        value = "\n".join(f"{m.get('role', '')}: {m.get('content', '')}" for m in value if isinstance(m, dict))
    elif not isinstance(value, str):
        value = json.dumps(value)
    return value.replace("\x00", "\u2400")


def _json_safe(value):
    """Dataset cells for a JSON column: NUL-free text (PostgreSQL jsonb refuses \u0000 too)."""
    if isinstance(value, str):
        return value.replace("\x00", "\u2400")
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def rollout_objects(run: Run, event: dict) -> list[Rollout]:
    step = event["step"]
    objs = []
    for row in event["rows"]:
        completion = _text(row["completion"])
        objs.append(Rollout(
            run=run, step=step, index=row["index"], group=row["group"], prompt=_text(row["prompt"]),
            completion=completion, rewards=row["rewards"], reward=row["reward"], advantage=row["advantage"],
            length=row["length"], truncated=row["truncated"], reflections=find_reflections(completion),
            columns=_json_safe(row.get("columns") or {}),
        ))
    return objs


def ingest_events(run: Run, events: list[dict]) -> dict:
    """Store a batch of events; return what changed (for the live push)."""
    rollouts: list[Rollout] = []
    metrics: list[StepMetric] = []
    faults: dict[str, dict] = {}
    for event in events:
        if event["type"] == "reward_fault":
            faults[event["name"]] = {k: event.get(k) for k in ("faults", "disabled", "error", "step")}
        elif event["type"] == "rollouts":
            rollouts.extend(rollout_objects(run, event))
        elif event["type"] == "metrics":
            metrics.append(StepMetric(run=run, step=event["step"], metrics=event["metrics"],
                                      logged_at=datetime.fromtimestamp(event["ts"], tz=timezone.utc)))
    # Several log lines can share a step (TRL logs the train summary at the last step): merge them.
    merged: dict[int, StepMetric] = {}
    for m in metrics:
        if m.step in merged:
            merged[m.step].metrics = {**merged[m.step].metrics, **m.metrics}
        else:
            merged[m.step] = m
    with transaction.atomic():
        Rollout.objects.bulk_create(rollouts, batch_size=2000, ignore_conflicts=True)
        for m in merged.values():
            existing = StepMetric.objects.filter(run=run, step=m.step).first()
            if existing:
                existing.metrics = {**existing.metrics, **m.metrics}
                existing.save(update_fields=["metrics"])
            else:
                m.save()
        if faults:
            run.reward_faults = {**run.reward_faults, **faults}
            run.save(update_fields=["reward_faults"])
    steps = sorted({m.step for m in merged.values()} | {r.step for r in rollouts})
    return {"steps": steps, "rollouts": len(rollouts)}


def ingest_log(run: Run, path) -> tuple[dict, list[dict]]:
    """Ingest what the event log holds past ``run.event_offset``; advance the offset in the same transaction."""
    events, offset = read_events(path, run.event_offset)
    if not events:
        return {"steps": [], "rollouts": 0}, []
    with transaction.atomic():
        changed = ingest_events(run, events)
        # The step counter shows completed optimizer steps: TRL logs metrics after each one.
        done = max([e["step"] for e in events if e["type"] == "metrics"] + [run.step])
        run.event_offset, run.step = offset, min(done, run.total_steps or done)
        run.save(update_fields=["event_offset", "step"])
    return changed, events
