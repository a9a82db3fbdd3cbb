"""TRL's completions tables as events: the ``completions/completions_{step:05d}.parquet`` files GRPOTrainer writes
under its output_dir with ``log_completions=True`` (GRPOTrainer.log), or a dataset of them (what
``log_completions_hub_repo`` uploads: the same files), from a local folder or one file.

A table's columns (TRL 1.16): ``step``, ``prompt``, ``completion`` (text, or a conversation: a list of messages),
one column per reward function (its name; NaN where it returned None), the columns reward functions logged with
``log_extra``, and ``advantage``. TRL writes the last generation batch at each logging step, so a run logged every
10 steps has the rollouts of every 10th batch; a batch trained at several steps (steps_per_generation) is written at
each of them and stored once. Completions of one prompt are consecutive (TRL's RepeatSampler): a group is a run of
equal prompts, ``num_generations`` long. Metrics come from ``trainer_state.json`` (the last checkpoint's
``log_history``). The tables hold no token counts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from pathlib import Path

import orjson

from runs.attach.importers import MAX_FILE_BYTES, MAX_FILES, Converted, ImportFault
from runs.attach.importers.rootfs import open_file
from runs.limited import out_of_memory

NAME = re.compile(r"completions_(\d+)\.parquet$")
REQUIRED = ("prompt", "completion", "advantage")
MAX_STATE_BYTES = 256 * 1024 * 1024


def table_files(path: str | Path, *, allow_empty: bool = False) -> list[Path]:
    """The completions tables under ``path``: one parquet file, an output_dir's ``completions/`` folder, or a folder
    of parquet files (a dataset of them, ``data/`` included); in step order. ``allow_empty``: none yet is no error
    (a watched run that has not logged yet)."""
    path = Path(path)
    if path.is_file():
        return [path]
    for folder in (path / "completions", path, path / "data"):
        if folder.is_dir():
            files = [p for p in folder.glob("*.parquet") if p.is_file()]
            if files:
                if len(files) > MAX_FILES:
                    raise ImportFault(f"{folder.name}: {len(files)} parquet files, more than {MAX_FILES}")
                return sorted(files, key=_order)
    if allow_empty:
        return []
    raise ImportFault(
        f"{path.name}: no completions tables (completions/completions_*.parquet, as TRL writes with "
        "log_completions=True, or *.parquet)"
    )


def _order(path: Path) -> tuple:
    match = NAME.search(path.name)
    return (0, int(match.group(1)), path.name) if match else (1, 0, path.name)


def _at(where) -> str:
    return f"{where[0]}: row {where[1]}" if isinstance(where, tuple) else where


def _text(value, where, column: str):
    """A prompt or completion as TRL logs it: text, or a list of messages (dicts with a role)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        return [{k: v for k, v in m.items() if v is not None} for m in value]
    raise ImportFault(f"{_at(where)}: {column!r} is {_kind(value)}, not text or a list of messages")


def _kind(value) -> str:
    return "empty" if value is None else f"a {type(value).__name__} ({str(value)[:40]!r})"


def _number(value, where, column: str, *, required: bool = False) -> float | None:
    if type(value) is float and math.isfinite(value):  # the common case, first
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if required:
            raise ImportFault(f"{_at(where)}: {column!r} is empty, not a number")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ImportFault(f"{_at(where)}: {column!r} is {_kind(value)}, not a finite number")
    return float(value)


def read_table(path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open_file(path) as fh:
        size = fh.seek(0, 2)
        if size > MAX_FILE_BYTES:
            raise ImportFault(f"{path.name}: {size} bytes, more than {MAX_FILE_BYTES} a table may hold")
        fh.seek(0)
        try:
            # one thread, no scanner: under a tight address-space limit a worker thread that fails to launch leaves
            # Arrow's dataset scanner waiting for it for ever (pyarrow 26)
            table = pq.ParquetFile(fh).read(use_threads=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            if isinstance(exc, MemoryError) or out_of_memory(str(exc)):
                raise MemoryError(str(exc)) from None  # the child names the limit
            raise ImportFault(f"{path.name}: not a readable parquet file ({str(exc).splitlines()[0][:160]})") from None
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise ImportFault(
            f"{path.name}: no {', '.join(repr(c) for c in missing)} column (TRL's completions table has step, "
            "prompt, completion, a column per reward function, advantage)"
        )
    return table


def reward_columns(table) -> list[str]:
    """TRL writes the reward functions' columns right after ``completion``, floats (NaN for None); the columns
    reward functions logged (log_extra) follow them, until ``advantage``."""
    import pyarrow as pa

    names = table.column_names
    start = names.index("completion") + 1
    end = names.index("advantage") if names.index("advantage") > start else len(names)
    out = []
    for name in names[start:end]:
        kind = table.schema.field(name).type
        if name == "step" or not (pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_null(kind)):
            break
        out.append(name)
    return out


def infer_generations(prompts: list[str]) -> int:
    """TRL repeats each prompt num_generations times in a row: the greatest common divisor of the runs of equal
    prompts (a prompt drawn twice in a row makes a run of 2G)."""
    runs, current, length = [], None, 0
    for prompt in prompts:
        if prompt == current:
            length += 1
        else:
            if length:
                runs.append(length)
            current, length = prompt, 1
    if length:
        runs.append(length)
    return math.gcd(*runs) if runs else 1


def _key(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def convert(
    path: str | Path,
    *,
    reward_names: list[str] | None = None,
    reward_weights: list[float] | None = None,
    num_generations: int | None = None,
    skip: set[str] = frozenset(),
    previous: str | None = None,
    settle_s: float | None = None,
    state: dict | None = None,
) -> Converted:
    """The tables under ``path`` (``table_files``) as rollouts events, with trainer_state.json's metrics.
    ``reward_names``: the reward functions' columns (default: the numeric columns TRL writes after
    ``completion``); ``reward_weights``: GRPOConfig.reward_weights (default 1 each) for the total reward;
    ``skip``: file names already imported (watch mode); ``previous``: the last batch imported, so a batch TRL wrote
    again is stored once; ``settle_s``: leave the newest table for later while TRL may still be writing it (modified
    within that many seconds); ``state``: what the watch's last read left (the trainer state's size and time: TRL
    rewrites it whole, so it is read again only when it changed)."""
    root = Path(path)
    files = [f for f in table_files(root, allow_empty=settle_s is not None) if f.name not in skip]
    if settle_s is not None and files and time.time() - files[-1].stat().st_mtime < settle_s:
        files = files[:-1]
    out = Converted(source="trl")
    seen = (state or {}).get("trainer_state")
    state, signature = trainer_state(root, unchanged=seen)
    if settle_s is not None and signature:
        out.watch_state["trainer_state"] = signature
    if state:
        out.total_steps = _int(state.get("max_steps"))
        out.every = _int(state.get("logging_steps"))
    last = add_tables(
        out,
        ((file.name, read_table(file)) for file in files),
        reward_names=reward_names,
        reward_weights=reward_weights,
        num_generations=num_generations,
        previous=previous,
    )
    out.config = {"previous": last}
    if state:
        out.log_metrics = metrics_events(state, out.total_steps)
        out.events += out.log_metrics
    # TRL's table has no token counts, and re-tokenizing its decoded text does not give them back (decoding drops
    # special tokens and merges byte pieces): lengths are left at 0 and the run page says so
    out.length_known = False
    out.notes.append("TRL's completions tables hold no token counts: lengths are 0, truncation unknown")
    out.events.sort(key=lambda e: (e["step"], e["type"] != "rollouts"))
    return out


def add_tables(
    out: Converted,
    tables,
    *,
    reward_names: list[str] | None,
    reward_weights: list[float] | None,
    num_generations: int | None,
    previous: str | None,
) -> str | None:
    """Each ``(name, table)`` of ``tables`` (TRL's completions tables, in the order TRL wrote them; ``name`` names
    it in errors) as rollouts events onto ``out``; a batch equal to the one before it (``previous`` for the first),
    which TRL writes again when it trains it again, is stored once. Returns the last batch's fingerprint."""
    names: list[str] | None = reward_names
    last = previous
    for name, table in tables:
        columns = reward_names if reward_names is not None else reward_columns(table)
        unknown = [c for c in columns if c not in table.column_names]
        if unknown:
            raise ImportFault(f"{name}: no reward column {', '.join(repr(c) for c in unknown)}")
        if names is None:
            names = columns
        elif columns != names:
            raise ImportFault(
                f"{name}: reward columns {columns} differ from the first table's {names}: import the run's "
                "tables together only"
            )
        weights = reward_weights if reward_weights is not None else [1.0] * len(names)
        if len(weights) != len(names):
            raise ImportFault(f"reward_weights: {len(weights)} weights for {len(names)} reward functions {names}")
        for event in table_events(name, table, names, weights, num_generations):
            fingerprint = hashlib.sha256(
                orjson.dumps([[r["prompt"], r["completion"], r["advantage"]] for r in event["rows"]])
            ).hexdigest()
            if fingerprint == last:
                out.notes.append(f"step {event['step']}: the batch of the step before, trained again: stored once")
                continue
            last = fingerprint
            out.events.append(event)
            out.num_generations = out.num_generations or event["num_generations"]
        out.files.append(name)
    out.reward_names = names or []
    return last


def table_events(file: str, table, names: list[str], weights: list[float], num_generations: int | None):
    """One TRL completions table (pyarrow) as rollouts events, one a step; ``file`` names it in errors."""
    data = {c: table.column(c).to_pylist() for c in ("prompt", "completion", "advantage", *names)}
    extra = [c for c in table.column_names if c not in data and c != "step"]
    extras = {c: table.column(c).to_pylist() for c in extra}
    steps = table.column("step").to_pylist() if "step" in table.column_names else None
    match = NAME.search(file)
    by_step: dict[int, list[int]] = {}
    for i in range(table.num_rows):
        step = steps[i] if steps is not None else (int(match.group(1)) if match else None)
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ImportFault(f"{file}: row {i}: 'step' is {_kind(step)}, not a whole number")
        by_step.setdefault(step, []).append(i)
    for step, indexes in by_step.items():
        rows = []
        for index, i in enumerate(indexes):
            where = (file, i)  # named in an error only
            rewards = [_number(data[c][i], where, c) for c in names]
            scored = [(r, w) for r, w in zip(rewards, weights) if r is not None]
            rows.append(
                {
                    "index": index,
                    "group": 0,
                    "prompt": _text(data["prompt"][i], where, "prompt"),
                    "completion": _text(data["completion"][i], where, "completion"),
                    "rewards": rewards,
                    "reward": sum(r * w for r, w in scored) if scored else None,
                    "advantage": _number(data["advantage"][i], where, "advantage", required=True),
                    "length": 0,
                    "truncated": False,
                    "columns": {c: _cell(extras[c][i]) for c in extra},
                }
            )
        g = num_generations or infer_generations([_key(r["prompt"]) for r in rows])
        if len(rows) % g:
            raise ImportFault(f"{file}: step {step}: {len(rows)} rows are not whole groups of {g}")
        for row in rows:
            row["group"] = row["index"] // g
        yield {"type": "rollouts", "step": step, "num_generations": g, "reward_names": list(names), "rows": rows}


def _cell(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def output_dir(path: Path) -> Path:
    """The trainer's output_dir for a path given: itself, or above a table or the completions folder."""
    path = path if path.is_dir() else path.parent
    return path.parent if path.name == "completions" else path


def trainer_state(root: Path, unchanged: list | None = None) -> tuple[dict | None, list | None]:
    """The Trainer's state (max_steps, logging_steps, log_history): the output_dir's own, or its last
    checkpoint's; and its signature (name, size, time), by which ``unchanged`` (the last read's) leaves it unread:
    (None, signature)."""
    root = output_dir(root)
    candidates = [root / "trainer_state.json"] + sorted(
        root.glob("checkpoint-*/trainer_state.json"),
        key=lambda p: int(p.parent.name.rsplit("-", 1)[1]) if p.parent.name.rsplit("-", 1)[1].isdigit() else -1,
        reverse=True,
    )
    for path in candidates:
        if path.is_file():
            with open_file(path) as fh:
                info = os.fstat(fh.fileno())
                signature = [str(path.relative_to(root)), info.st_size, info.st_mtime_ns]
                if signature == unchanged:
                    return None, signature
                if info.st_size > MAX_STATE_BYTES:
                    raise ImportFault(f"{path.parent.name}/{path.name}: more than {MAX_STATE_BYTES} bytes")
                data = fh.read(MAX_STATE_BYTES + 1)
            try:
                state = json.loads(data)
            except (ValueError, RecursionError):
                raise ImportFault(f"{path.parent.name}/{path.name}: not JSON") from None
            if not isinstance(state, dict) or not isinstance(state.get("log_history", []), list):
                raise ImportFault(f"{path.parent.name}/{path.name}: not a Trainer state (no log_history list)")
            return state, signature
    return None, None


def metrics_events(state: dict, max_steps: int | None) -> list[dict]:
    """The Trainer's log_history as "metrics" events (TRL's names, which the run pages chart)."""
    merged: dict[int, dict] = {}
    for entry in state.get("log_history") or []:
        if not isinstance(entry, dict) or _int(entry.get("step")) is None:
            continue
        values = {
            k: (float(v) if math.isfinite(v) else None)
            for k, v in entry.items()
            if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)
        }
        merged.setdefault(entry["step"], {}).update(values)
    return [
        {"type": "metrics", "step": step, "max_steps": max_steps or 0, "metrics": metrics}
        for step, metrics in sorted(merged.items())
    ]
