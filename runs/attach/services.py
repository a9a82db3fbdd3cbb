"""Runs trained elsewhere: created by a client in the user's own training script (attached) or by an importer
(imported), their events appended to their event log and ingested like a run the app trains.

An external run has no dataset version (``dataset_label`` names its data), no supervisor and no lease: its status
comes from its source (the client's finish call, or the importer), its liveness from ``last_contact_at``."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import secrets
from collections.abc import Iterable
from datetime import UTC, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from grpo_web_protocol.events import clean

from runs.attach.checks import (
    MAX_RUN_METRIC_NAMES,
    EventRefused,
    deeper_than,
    event_problem,
    parse_line,
    shape_problem,
)
from runs.attach.shards import drop_shards_after, read_shard, store_shard
from runs.live import publish
from runs.models import JobStatus, Rollout, Run, StepMetric
from runs.partitions import ensure_partition
from runs.paths import event_log_path
from runs.rollouts.ingest import ingest_appended, ingest_log

log = logging.getLogger(__name__)

NAME_LENGTH = 200


class OffsetGap(Exception):
    """A batch that starts past the bytes taken so far: something in between was never received."""

    def __init__(self, expected: int):
        super().__init__(f"offset: this run has taken {expected} bytes; send from there")
        self.expected = expected


def resume_key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def external_run_create(
    *,
    owner,
    name: str,
    origin: str,
    model: str = "",
    config: dict | None = None,
    reward_names: Iterable[str] = (),
    dataset_label: str = "",
    host: str = "",
    command: str = "",
    reward_sources: dict | None = None,
    notes: Iterable[str] = (),
    status: str = JobStatus.RUNNING,
    provenance: dict | None = None,
) -> Run:
    """A run trained elsewhere. ``config``: the GRPOConfig as its source reported it (TRL's names); ``reward_names``
    in TRL's order (the rollouts' ``rewards`` follow it); ``reward_sources``: each function's source, where known.
    A finished status (an import) is finished now. ``provenance``: the source's reproducibility record, as checked
    by the caller (runs.attach.api's schema)."""
    if origin not in (Run.Origin.ATTACHED, Run.Origin.IMPORTED):
        raise ValueError(f"origin: an external run is attached or imported, not {origin!r}")
    config = clean(dict(config or {}))
    sources = reward_sources or {}
    weights = config.get("reward_weights") if isinstance(config.get("reward_weights"), list) else None
    names = [str(n) for n in reward_names]
    rewards = [
        {
            "name": n,
            "weight": weights[i] if weights and i < len(weights) and isinstance(weights[i], (int, float)) else 1.0,
            "external": True,
            **({"source": str(sources[n])} if sources.get(n) else {}),
        }
        for i, n in enumerate(names)
    ]
    max_steps = config.get("max_steps")
    now = timezone.now()
    finished = status in Run.FINISHED
    return Run.objects.create(
        owner=owner,
        name=(name or "external run")[:NAME_LENGTH],
        origin=origin,
        model=model[:500],
        dataset_version=None,
        dataset_label=dataset_label[:500],
        rewards=rewards,
        config=config,
        config_extra={},
        reported_host=host,
        reported_command=command,
        notes="\n".join(notes),
        status=status,
        total_steps=max_steps if isinstance(max_steps, int) and max_steps > 0 else 0,
        started_at=now,
        finished_at=now if finished else None,
        last_contact_at=now if origin == Run.Origin.ATTACHED else None,
        evaluation={},
        provenance=provenance or {},
    )


class AttachRefused(ValueError):
    """A run that cannot be attached; ``status``: the HTTP status to answer (400, or 429 past the user's limit)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def attached_run_create(*, owner, **fields) -> tuple[Run, str]:
    """An attached run and the resume key its client keeps beside its spool (only its hash is stored). Refused
    (AttachRefused) past the owner's limit of attached runs running at once (GRPO_ATTACH_MAX_RUNNING), or with a
    ``config`` nested deeper than GRPO_MAX_NESTING."""
    limit = settings.GRPO_MAX_NESTING
    if deeper_than(fields.get("config") or {}, limit):
        raise AttachRefused(f"config: nested more than {limit} levels deep (GRPO_MAX_NESTING)")
    running = Run.objects.filter(owner=owner, origin=Run.Origin.ATTACHED, status=JobStatus.RUNNING).count()
    if running >= settings.GRPO_ATTACH_MAX_RUNNING:
        raise AttachRefused(
            f"you have {running} attached runs running, the limit (GRPO_ATTACH_MAX_RUNNING): finish one first (a run "
            f"whose script is gone is closed as lost after GRPO_ATTACH_LOST_AFTER_S)",
            429,
        )
    key = secrets.token_urlsafe(24)
    run = external_run_create(owner=owner, origin=Run.Origin.ATTACHED, **fields)
    run.resume_key_hash = resume_key_hash(key)
    run.save(update_fields=["resume_key_hash"])
    return run, key


def check_events(events: list, *, imported: bool = False) -> None:
    for i, event in enumerate(events, start=1):
        problem = event_problem(event, f"event {i}", allow_eval=imported)
        if problem:
            raise EventRefused(problem)


def external_events_append(*, run: Run, events: list[dict], imported: bool = False) -> dict:
    """Append ``events`` to the run's event log and ingest them (rollouts keyed (run, step, index), metrics (run,
    step), evaluations (run, step): events sent twice store nothing twice). Each is checked first (EventRefused
    names the first that cannot be stored, and nothing is written). ``imported``: an importer's events, which may
    hold periodic evaluations (verl's validation dumps); a client's may not. Returns ingest's summary: {"steps",
    "rollouts", "evaluated"}."""
    check_events(events, imported=imported)
    metric_names_check(run, events)
    data = b"".join(json.dumps(clean(e), allow_nan=False).encode() + b"\n" for e in events)
    return append_lines(run=run, data=data)


def append_lines(*, run: Run, data: bytes, received: int | None = None, events: list[dict] | None = None) -> dict:
    """Append checked, complete event-log lines and ingest them, all or nothing: the file is cut back if ingest
    fails. ``received``: the run's new count of client bytes taken, saved in the same transaction. ``events``: the
    lines as parse_line parsed them, stored as they are when the log held nothing unread (else the log is read)."""
    path = event_log_path(run)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the run's partition (PostgreSQL), made and committed before the batch's transaction: made inside it, it would
    # hold the default partition's lock until the batch is stored
    ensure_partition(run.pk)
    # the row lock orders appends on PostgreSQL; the file lock on SQLite, where select_for_update locks nothing
    with open(path, "ab") as fh, transaction.atomic():
        fcntl.flock(fh, fcntl.LOCK_EX)
        locked = Run.objects.select_for_update().get(pk=run.pk)
        run.event_offset, run.step = locked.event_offset, locked.step
        if received is not None and locked.received_bytes != received - len(data):
            raise OffsetGap(locked.received_bytes)  # another request took these bytes first
        size = path.stat().st_size
        fh.write(data)
        fh.flush()
        try:
            if events is not None and run.event_offset == size:
                changed, read = ingest_appended(run, events, size + len(data))
            else:
                changed, read = ingest_log(run, path)
            update = ["last_contact_at"]
            run.last_contact_at = timezone.now()
            max_steps = [e["max_steps"] for e in read if e["type"] == "metrics" and e.get("max_steps")]
            if max_steps and max(max_steps) != run.total_steps:
                run.total_steps = max(max_steps)
                update.append("total_steps")
            if received is not None:
                run.received_bytes = received
                update.append("received_bytes")
            run.save(update_fields=update)
        except BaseException:
            os.truncate(path, size)
            raise
    if read:
        push(run, steps=changed["steps"], rollouts=changed["rollouts"], evaluations=changed["evaluated"])
    return changed


def push(run: Run, **extra) -> None:
    """Tell open pages; best effort: a Redis outage never refuses a client's batch."""
    try:
        publish(run.pk, status=run.status, step=run.step, **extra)
    except Exception as exc:  # redis.ConnectionError and friends
        log.warning("run %s: live update not sent: %s", run.pk, exc)


LOST = "lost contact: "  # the start of the error of an attached run the reaper closed as lost


def closed_as_lost(run: Run) -> bool:
    return run.origin == Run.Origin.ATTACHED and run.status == JobStatus.FAILED and run.error.startswith(LOST)


def attached_run_reap_lost(*, now=None, after: float | None = None) -> list[Run]:
    """Attached runs still running whose client has sent nothing, not even a heartbeat (every 10 s while it runs),
    for ``after`` seconds (GRPO_ATTACH_LOST_AFTER_S): failed as lost, naming when the client was last heard. Called
    by every worker's heartbeat, beside the app's own runs' reaper. The client's spool still holds what it did not
    send: should it speak again, the run is reopened (attached_run_reopen)."""
    now = now or timezone.now()
    limit = now - timedelta(seconds=settings.GRPO_ATTACH_LOST_AFTER_S if after is None else after)
    silent = Run.objects.filter(origin=Run.Origin.ATTACHED, status=JobStatus.RUNNING, last_contact_at__lt=limit)
    reaped = []
    for run_id in silent.values_list("pk", flat=True):
        with transaction.atomic():
            run = silent.select_for_update(skip_locked=True).filter(pk=run_id).first()
            if run is None:
                continue
            since = run.last_contact_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            run.mark_failed(f"{LOST}no word from the client since {since}")
            if run.resumable:  # the app cannot resume what it did not train
                run.resumable = False
                run.save(update_fields=["resumable"])
            reaped.append(run)
        push(run)
    return reaped


def attached_run_reopen(*, run: Run) -> None:
    """The client of a run closed as lost speaks again (it was cut off, not gone): the run is running again, and
    what its spool kept arrives as usual. A run that ended any other way stays as it ended."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if not closed_as_lost(locked):
            return
        run.status, run.error, run.finished_at = JobStatus.RUNNING, "", None
        run.last_contact_at = timezone.now()
        run.save(update_fields=["status", "error", "finished_at", "last_contact_at"])
    push(run)


def external_run_heartbeat(*, run: Run) -> None:
    if closed_as_lost(run):
        attached_run_reopen(run=run)
    run.last_contact_at = timezone.now()
    run.save(update_fields=["last_contact_at"])


def external_run_finish(*, run: Run, failed: bool = False, error: str = "") -> None:
    """The source says the run ended: completed, or failed with ``error``. A finished run stays as it ended (but one
    closed as lost: its client says how it really ended)."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.is_finished and not closed_as_lost(locked):
            return
        run.last_contact_at = timezone.now()
        run.save(update_fields=["last_contact_at"])
        if failed:
            run.mark_failed(error or "the training script failed")
            if run.resumable:  # the app cannot resume what it did not train
                run.resumable = False
                run.save(update_fields=["resumable"])
        else:
            run.mark_completed()
    push(run)


def attached_batch_append(*, run: Run, data: bytes, offset: int) -> dict:
    """A client's batch: spool bytes (complete event-log lines) starting at byte ``offset`` of its spool. Only the
    bytes past what the run has taken are appended (a batch sent again is acknowledged, not stored twice); a batch
    that starts past them raises OffsetGap. Lines are checked before anything is written (EventRefused), each
    rollouts event against the run's shape (checks.shape_problem) and the keys (step, index) the batch and the run
    hold: a batch is stored whole or not at all, so the rows counted are the rows stored. A "resume" marker (the
    script ran again from its checkpoint at ``step``) drops the rows of the steps after it before the lines that
    follow are stored: those steps are trained again; a completed or cancelled run refuses one. A run closed as lost
    is reopened. Returns {"taken": bytes taken, **ingest's summary}."""
    if closed_as_lost(run):
        attached_run_reopen(run=run)
    taken = Run.objects.filter(pk=run.pk).values_list("received_bytes", flat=True).get()
    if offset > taken:
        raise OffsetGap(taken)
    new = data[taken - offset :] if offset + len(data) > taken else b""
    if not new:
        return {"taken": taken, "steps": [], "rollouts": 0, "evaluated": []}
    if not new.endswith(b"\n"):
        raise EventRefused("the batch must end with a complete line (a newline)")
    # (lines, their events each with its line's place, then a resume marker's step or None)
    segments: list[tuple[bytes, list[tuple[str, dict]], int | None]] = []
    start, position, parsed = 0, 0, []
    shape = run_shape(run)
    batch_keys: dict[tuple[int, int], str] = {}  # (step, index) of the batch's rows: the line that holds it
    for number, line in enumerate(new.splitlines(keepends=True), start=1):
        where = f"line {number} (spool byte {taken + position})"
        position += len(line)
        if len(line) > settings.GRPO_ATTACH_MAX_LINE_BYTES:
            raise EventRefused(f"{where}: longer than {settings.GRPO_ATTACH_MAX_LINE_BYTES} bytes")
        if not line.strip():
            continue
        event = parse_line(line, where)
        parsed.append((where, event))
        if event["type"] == "rollouts":
            problem = shape_problem(event, where, **shape)
            if problem:
                raise EventRefused(problem)
            for i, row in enumerate(event["rows"]):
                other = batch_keys.setdefault((event["step"], row["index"]), where)
                if other != where:
                    raise EventRefused(
                        f"{where}: rows[{i}]: step {event['step']}, index {row['index']} is sent twice in this batch "
                        f"(also on {other.partition(' (')[0]})"
                    )
        if event["type"] == "resume":
            if run.status in (JobStatus.COMPLETED, JobStatus.CANCELLED):
                raise EventRefused(
                    f"{where}: resume: this run is {run.status}; a finished run is not trained again (attach a new "
                    f"run for a new training)"
                )
            segments.append((new[start:position], parsed, event["step"]))
            start, parsed = position, []
            batch_keys = {key: at for key, at in batch_keys.items() if key[0] <= event["step"]}
    segments.append((new[start:], parsed, None))
    metric_names_check(run, [event for _, events, _ in segments for _, event in events])
    summary = {"steps": set(), "rollouts": 0, "evaluated": []}
    received, path = taken, event_log_path(run)
    size = path.stat().st_size if path.exists() else 0
    try:
        with transaction.atomic():
            for lines, events, resume_step in segments:
                for where, event in events:
                    if event["type"] == "rollouts":
                        stored_key_check(run, event, where)
                received += len(lines)
                changed = append_lines(run=run, data=lines, received=received, events=[e for _, e in events])
                summary["steps"] |= set(changed["steps"])
                summary["rollouts"] += changed["rollouts"]
                if resume_step is not None:
                    attached_run_resume(run=run, step=resume_step)
    except BaseException:
        if path.exists():
            os.truncate(path, size)  # the database rolled back: so does the log
        raise
    return {"taken": received, **summary, "steps": sorted(summary["steps"])}


def metric_names_check(run: Run, events: list[dict]) -> None:
    """EventRefused when the metrics ``events`` log would give the run more than MAX_RUN_METRIC_NAMES distinct names.
    A run logs the same names step after step: names its newest step holds cost one row's read, and only a batch
    with names new to it reads every name the run holds."""
    sent = {name for event in events if event.get("type") == "metrics" for name in event["metrics"]}
    if not sent:
        return
    newest = StepMetric.objects.filter(run=run).order_by("-step").values_list("metrics", flat=True).first() or {}
    if sent <= newest.keys():
        return
    table = connection.ops.quote_name(StepMetric._meta.db_table)
    if connection.vendor == "postgresql":
        sql = f"SELECT DISTINCT jsonb_object_keys(metrics) FROM {table} WHERE run_id = %s"
    else:
        sql = f"SELECT DISTINCT j.key FROM {table}, json_each({table}.metrics) AS j WHERE run_id = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [run.pk])
        held = {name for (name,) in cursor.fetchall()}
    names = held | sent
    if len(names) > MAX_RUN_METRIC_NAMES:
        new = sorted(sent - held)
        raise EventRefused(
            f"metrics: a run holds at most {MAX_RUN_METRIC_NAMES} distinct metric names; it holds {len(held)} and "
            f"this batch adds {len(new)} more (first new: {new[0][:60]!r})"
        )


def run_shape(run: Run) -> dict:
    """What a rollouts event of ``run`` must fit (checks.shape_problem): its reward functions' names, in order, and its
    group size when its config says it."""
    G = run.config.get("num_generations")
    return {
        "reward_names": [r.get("name") for r in run.rewards],
        "num_generations": G if isinstance(G, int) and not isinstance(G, bool) and G > 0 else None,
    }


def stored_key_check(run: Run, event: dict, where: str) -> None:
    """EventRefused when a row of ``event`` has the key (step, index) of a row the run holds: a step's rows are sent
    once (a script that trains a step again sends a resume marker first, which drops the rows after its step)."""
    indexes = {row["index"] for row in event["rows"]}
    if not indexes:
        return
    step = event["step"]
    stored = Rollout.objects.filter(run=run, step=step, index__gte=min(indexes), index__lte=max(indexes))
    clash = sorted(indexes.intersection(stored.values_list("index", flat=True)))
    if clash:
        raise EventRefused(
            f"{where}: step {step}: the run holds rows of index {', '.join(map(str, clash[:5]))}"
            f"{' and more' if len(clash) > 5 else ''} already; a step's rows are sent once (or after a resume marker)"
        )


def attached_shard_store(*, run: Run, step: int, data: bytes) -> dict:
    """A client's token shard of optimizer step ``step`` (Parquet bytes), checked (ShardRefused names what is wrong,
    and nothing is stored) and stored whole as the step's shard, in place of one sent before: sent twice, stored
    once. Returns {"step", "rows", "bytes"}."""
    G = run.config.get("num_generations")
    table = read_shard(
        data,
        step,
        num_generations=G if isinstance(G, int) and not isinstance(G, bool) and G > 0 else None,
        max_decoded_bytes=settings.GRPO_ATTACH_MAX_EXPANDED_BYTES,
    )
    store_shard(run.run_dir / "tokens", step, data)
    run.last_contact_at = timezone.now()
    run.save(update_fields=["last_contact_at"])
    return {"step": step, "rows": table.num_rows, "bytes": len(data)}


def attached_run_resume(*, run: Run, step: int) -> None:
    """The client's script runs again from its checkpoint at ``step``: the steps after it are trained again, so
    their rows and token shards go (the new ones take their keys) and the run is running again."""
    drop_shards_after(run.run_dir / "tokens", step)
    Rollout.objects.filter(run=run, step__gt=step).delete()
    StepMetric.objects.filter(run=run, step__gt=step).delete()
    run.step, run.checkpoint_step = min(run.step, step), min(run.checkpoint_step, step)
    run.status, run.finished_at, run.error = JobStatus.RUNNING, None, ""
    run.save(update_fields=["step", "checkpoint_step", "status", "finished_at", "error"])
