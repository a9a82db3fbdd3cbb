"""Event log -> database. Idempotent: rollouts are keyed (run, step, index) and metrics (run, step), so reading the
same events twice (a supervisor restart, a resumed run) never duplicates a row.

Rollouts are the bulk (a run can store millions), so they skip model instances: each becomes a tuple in
``ROLLOUT_COLUMNS`` order, written with COPY on PostgreSQL (``bench/ingest.py`` compares it with a raw COPY) and with
one multi-row INSERT per batch on SQLite.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone

import orjson
from django.db import connection, transaction
from grpo_web_protocol.events import parse_event, read_lines

from rewards.step_scores import MAX_SPLIT_CHARS, MAX_STEP_SCORES
from runs.evaluations.services import store_periodic
from runs.models import Rollout, Run, StepMetric, reward_bucket
from runs.partitions import ensure_partition
from runs.rollouts.groups import group_stats
from runs.rollouts.reflection import matcher, reflection_mask
from runs.text import as_text, prompt_key, stored_json, stored_text
from runs.textindex import packed_text

ROLLOUT_COLUMNS = (
    "run_id",
    "step",
    "index",
    "group",
    "prompt",
    "prompt_key",
    "completion",
    "rewards",
    "reward",
    "reward_bucket",
    "advantage",
    "length",
    "truncated",
    "zero_std",
    "reflections",
    "reflective",
    "reflection_mask",
    "columns",
    "step_scores",
    "first_step_score",
    "messages",
)
_COMPLETION_AT = ROLLOUT_COLUMNS.index("completion")  # packed on SQLite (runs.models.fields.PackedTextField)
READ_LIMIT = 32 * 1024 * 1024  # bytes of event log per transaction when catching up on a long log
_JSON_AT = tuple(
    i for i, c in enumerate(ROLLOUT_COLUMNS) if c in ("rewards", "reflections", "columns", "step_scores", "messages")
)
_JSONB = b"\x01"
_JSONB_EMPTY_LIST = b"\x01[]"
_NUL_SIGN = "\u2400".encode()


def _dumps(value) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # what orjson refuses and json writes: integers past 64 bits, non-text keys
        return json.dumps(value).encode()


def _json_text(value) -> bytes:
    text = _dumps(value)
    # as ExactJSONField stores it (jsonb refuses \u0000): only the rare row with a NUL or U+2400 pays for the walk
    return _dumps(stored_json(value)) if b"\\u0000" in text or _NUL_SIGN in text else text


def step_scores(value) -> tuple[dict | None, float | None]:
    """A row's per-step (process) scores as a reward function logged them ({"split": the delimiter or pattern,
    "scores": a number or None per step}), checked; and the first step's score (the first that was scored)."""
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("split"), str)
        or not isinstance(value.get("scores"), list)
    ):
        return None, None
    scores = [
        float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
        for v in value["scores"][:MAX_STEP_SCORES]
    ]
    kept = {"split": value["split"][:MAX_SPLIT_CHARS], "scores": scores}
    if isinstance(value.get("pattern"), bool):
        kept["pattern"] = value["pattern"]
    return kept, next((v for v in scores if v is not None), None)


def rollout_rows(run_id: int, event: dict, phrases: tuple[str, ...]):
    """One "rollouts" event as rows in ``ROLLOUT_COLUMNS`` order, one at a time. JSON columns are in jsonb's binary
    form, ready for a binary COPY: a version byte (1), then the JSON text."""
    step, find = event["step"], matcher(phrases).find
    bits = {phrase: reflection_mask([phrase], phrases) for phrase in phrases}
    rewards_by_group: dict[int, list[float]] = {}
    for row in event["rows"]:
        values = rewards_by_group.setdefault(row["group"], [])
        if row["reward"] is not None:
            values.append(row["reward"])
    zero_std = {group: group_stats(values).zero_std for group, values in rewards_by_group.items()}
    keys: dict[str, str] = {}
    for row in event["rows"]:
        prompt, completion = as_text(row["prompt"]), as_text(row["completion"])
        key = keys.get(prompt) or keys.setdefault(prompt, prompt_key(prompt))
        tags = find(completion)
        reward = row["reward"]
        scores, first_score = step_scores(row.get("step_scores"))
        yield (
            run_id,
            step,
            row["index"],
            row["group"],
            stored_text(prompt),  # as ExactTextField stores it: COPY and INSERT bypass the field
            key,
            stored_text(completion),
            _JSONB + _dumps(row["rewards"]),
            reward,
            reward_bucket(reward),
            row["advantage"],
            row["length"],
            row["truncated"],
            zero_std[row["group"]],
            _JSONB + _dumps(tags) if tags else _JSONB_EMPTY_LIST,
            bool(tags),
            sum(bits[t] for t in tags) if tags else 0,
            _JSONB + _json_text(row.get("columns") or {}),
            _JSONB + _dumps(scores) if scores is not None else None,
            first_score,
            _JSONB + _json_text(row["completion"]) if isinstance(row["completion"], list) else None,
        )


def store_rollouts(rows: Callable[[], Iterable[tuple]]) -> int:
    """Insert the rows (``rows()`` gives them, from ``rollout_rows``) whose key (run, step, index) is new; rows
    already stored are left as they are. Returns the number of rows given."""
    table = Rollout._meta.db_table
    columns = ", ".join(connection.ops.quote_name(c) for c in ROLLOUT_COLUMNS)
    if connection.vendor == "postgresql":
        return _copy_rollouts(table, columns, rows)
    rows = [
        tuple(
            packed_text(v) if i == _COMPLETION_AT else v[1:].decode() if i in _JSON_AT and v is not None else v
            for i, v in enumerate(row)
        )
        for row in rows()
    ]
    placeholders = "(" + ", ".join(["%s"] * len(ROLLOUT_COLUMNS)) + ")"
    per_statement = 8000 // len(ROLLOUT_COLUMNS)  # well inside SQLite's limit of bound parameters (32766)
    with connection.cursor() as cursor:
        for i in range(0, len(rows), per_statement):
            chunk = rows[i : i + per_statement]
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {', '.join([placeholders] * len(chunk))} "
                f"ON CONFLICT DO NOTHING",
                [v for row in chunk for v in row],
            )
    return len(rows)


# Binary COPY: the server parses no text. The JSON columns already hold jsonb's binary form, which psycopg's bytea
# dumper sends as it is (in C).
_COPY_TYPES = [
    "int8",
    "int4",
    "int4",
    "int4",
    "text",
    "text",
    "text",
    "bytea",
    "float8",
    "int2",
    "float8",
    "int4",
    "bool",
    "bool",
    "bytea",
    "bool",
    "int8",
    "bytea",
    "bytea",
    "float8",
    "bytea",
]


def _copy(raw, target: str, columns: str, rows: Iterable[tuple]) -> int:
    from psycopg.copy import QueuedLibpqWriter  # PostgreSQL only: SQLite installs have no psycopg to load

    n = 0
    # a writer thread sends while this one formats the next rows, and the server inserts meanwhile
    with raw.copy(f"COPY {target} ({columns}) FROM STDIN (FORMAT BINARY)", writer=QueuedLibpqWriter(raw)) as copy:
        copy.set_types(_COPY_TYPES)
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


def _copy_rollouts(table: str, columns: str, rows: Callable[[], Iterable[tuple]]) -> int:
    """COPY straight into the table; when a key is already there (the log is read again after a restart), COPY into
    a temporary table instead and insert only the new keys."""
    from psycopg.errors import UniqueViolation  # PostgreSQL only, as above

    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg's own cursor, for COPY
        try:
            with transaction.atomic():  # a savepoint: a conflict undoes only this COPY
                return _copy(raw, table, columns, rows())
        except UniqueViolation:
            pass
        raw.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS rollout_incoming ON COMMIT DELETE ROWS AS "
            f"SELECT {columns} FROM {table} WITH NO DATA"
        )
        n = _copy(raw, "rollout_incoming", columns, rows())
        raw.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM rollout_incoming "
            f"ON CONFLICT (run_id, step, {connection.ops.quote_name('index')}) DO NOTHING"
        )
        raw.execute("TRUNCATE rollout_incoming")
    return n


def run_phrases(run: Run) -> tuple[str, ...]:
    """The run's phrase list as stored now: an edit on the page applies to the very next batch."""
    stored = Run.objects.filter(pk=run.pk).values_list("reflection_phrases", flat=True).first()
    return tuple(stored if stored is not None else run.reflection_phrases)


def ingest_events(run: Run, events: list[dict]) -> dict:
    """Store a batch of events; return what changed (for the live push)."""
    return _ingest(run, lambda: iter(events))


def _ingest(run: Run, events: Callable[[], Iterator[dict]]) -> dict:
    """``events()`` gives the batch (again, should the rollouts need a second pass): rollouts go to the database as
    they come, so parsing the log overlaps with the database storing the rows already sent; the other events follow
    in the same transaction."""
    phrases = run_phrases(run)
    rollout_steps: set[int] = set()
    others: list[dict] = []

    def rows():
        rollout_steps.clear()
        others.clear()
        for event in events():
            if event["type"] == "rollouts":
                if event["rows"]:
                    rollout_steps.add(event["step"])
                yield from rollout_rows(run.pk, event, phrases)
            else:
                others.append(event)

    # the run's own partition (PostgreSQL), made in a transaction of its own before this batch's
    ensure_partition(run.pk)
    with transaction.atomic():
        stored = store_rollouts(rows)
        metrics: list[StepMetric] = []
        now = datetime.now(tz=timezone.utc)  # for a metrics line from outside that gave no time
        faults: dict[str, dict] = {}
        weak: dict[str, list] = {}
        evaluated: list[int] = []
        for event in others:
            if event["type"] == "reward_fault":
                faults[event["name"]] = {k: event.get(k) for k in ("faults", "disabled", "error", "step")}
            elif event["type"] == "reward_sandbox":
                weak[event["name"]] = [str(w) for w in event.get("weak") or []]
            elif event["type"] == "started" and isinstance(event.get("provenance"), dict):
                # each attempt reports its own (a resume may run on another worker): the latest is the run's
                run.provenance = {**event["provenance"], "attempt": run.attempt}
                run.save(update_fields=["provenance"])
            elif event["type"] == "checkpoint" and event["step"] > run.checkpoint_step:
                run.checkpoint_step = event["step"]
                run.save(update_fields=["checkpoint_step"])
            elif event["type"] == "eval":
                store_periodic(run, event)
                evaluated.append(event["step"])
            elif event["type"] == "metrics":
                metrics.append(
                    StepMetric(
                        run=run,
                        step=event["step"],
                        metrics=event["metrics"],
                        logged_at=datetime.fromtimestamp(event["ts"], tz=timezone.utc) if "ts" in event else now,
                    )
                )
        # Several log lines can share a step (TRL logs the train summary at the last step): merge them.
        merged: dict[int, StepMetric] = {}
        for m in metrics:
            if m.step in merged:
                merged[m.step].metrics = {**merged[m.step].metrics, **m.metrics}
            else:
                merged[m.step] = m
        # one read for the steps already stored (a log read again, a summary line), one insert for the rest
        existing = {
            e.step: e
            for e in StepMetric.objects.filter(
                run=run, step__gte=min(merged, default=0), step__lte=max(merged, default=-1)
            )
        }
        for step, m in merged.items():
            if step in existing:
                existing[step].metrics = {**existing[step].metrics, **m.metrics}
                existing[step].save(update_fields=["metrics"])
        StepMetric.objects.bulk_create([m for step, m in merged.items() if step not in existing])
        if faults:
            run.reward_faults = {**run.reward_faults, **faults}
            run.save(update_fields=["reward_faults"])
        if weak:
            run.sandbox_weak = {**run.sandbox_weak, **weak}
            run.save(update_fields=["sandbox_weak"])
    return {"steps": sorted(set(merged) | rollout_steps), "rollouts": stored, "evaluated": evaluated}


@contextmanager
def _no_cyclic_gc():
    """Parsed events are hundreds of thousands of small, acyclic objects: without this, the cyclic collector walks
    them over and over while they are created (a third of the ingest's time on large batches)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Fenced(Exception):
    """The attempt was taken from this supervisor (the run was reaped, or resumed by another): it may write nothing."""


def ingest_log(run: Run, path, *, lease=None) -> tuple[dict, list[dict]]:
    """Ingest what the event log holds past ``run.event_offset``, ``READ_LIMIT`` bytes a transaction; each advances
    the offset in the same transaction. Returns what changed and the events read (rollouts without their rows).

    ``lease``: a supervisor's token; each transaction first locks the run row and raises Fenced, writing nothing,
    unless the run is still held under that lease."""
    changed: dict = {"steps": [], "rollouts": 0, "evaluated": []}
    all_events: list[dict] = []
    while True:
        lines, offset = read_lines(path, run.event_offset, READ_LIMIT)
        if not lines:
            return changed, all_events
        read: list[dict] = []

        def events():
            read.clear()
            for line in lines:
                event = parse_event(line)
                read.append({k: v for k, v in event.items() if k != "rows"})
                yield event

        batch = _ingest_up_to(run, events, read, offset, lease)
        changed = {
            "steps": sorted(set(changed["steps"]) | set(batch["steps"])),
            "rollouts": changed["rollouts"] + batch["rollouts"],
            "evaluated": changed["evaluated"] + batch["evaluated"],
        }
        all_events.extend(read)


def ingest_appended(run: Run, events: list[dict], offset: int) -> tuple[dict, list[dict]]:
    """``ingest_log`` for lines just appended to a log that held nothing unread before them, already parsed by the
    caller (an attach client's batch, parsed once to be checked): ``events`` are those lines' events, ``offset`` the
    log's size after them. Returns what ingest_log returns."""
    read = [{k: v for k, v in event.items() if k != "rows"} for event in events]
    return _ingest_up_to(run, lambda: iter(events), read, offset, None), read


# the Run fields a batch's transaction sets on the caller's object (in _ingest_up_to and _ingest)
_INGEST_WRITES = ("event_offset", "step", "checkpoint_step", "reward_faults", "sandbox_weak", "provenance")


def _ingest_up_to(run: Run, events: Callable[[], Iterator[dict]], read: list[dict], offset: int, lease) -> dict:
    """Ingest ``events()`` (whose heads ``read`` holds once they are read) and advance the run's offset to
    ``offset``, in one transaction.

    Should the transaction fail (the database went away mid-batch, or at commit), ``run`` is put back as the database
    still has it: a supervisor keeps one Run across ticks, and an offset advanced only in memory would make its next
    tick read past lines that were never stored."""
    before = {name: getattr(run, name) for name in _INGEST_WRITES}
    try:
        with _no_cyclic_gc(), transaction.atomic():
            if (
                lease is not None
                and not Run.objects.select_for_update()
                .filter(pk=run.pk, lease=lease)
                .values_list("pk", flat=True)
                .first()
            ):
                raise Fenced(f"run {run.pk}: this supervisor's attempt was taken from it")
            batch = _ingest(run, events)
            # The step counter shows the newest step any data is for: metrics (logged every logging_steps) or a
            # rollout batch (one every generation), so a run logging metrics every 10 steps still moves each step.
            done = max([e["step"] for e in read if e["type"] in ("metrics", "rollouts")] + [run.step])
            run.event_offset, run.step = offset, min(done, run.total_steps or done)
            run.save(update_fields=["event_offset", "step"])
    except BaseException:
        for name, value in before.items():
            setattr(run, name, value)
        raise
    return batch
