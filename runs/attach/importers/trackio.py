"""A Trackio project as events: the SQLite file Trackio keeps for a project (``<TRACKIO_DIR>/<project>.db``, by
default under ``~/.cache/huggingface/trackio/``), read with the standard library, read-only: Trackio itself is not
needed.

What TRL writes there with ``report_to="trackio"`` (trackio 0.43, TRL 1.16), one ``metrics`` row per ``trackio.log``
call of a run (``run_name``), its ``metrics`` a JSON object:

- the Trainer's logs, through transformers' Trackio callback: TRL's metric names prefixed ``train/`` (``eval/`` for
  an evaluation's) with ``train/global_step``, the optimizer step they belong to (the row's own ``step`` column is
  Trackio's count of calls, not the training step);
- with ``log_completions=True``, ``{"completions": {"_type": "trackio.table", "_value": [rows]}}``: TRL's
  completions table (GRPOTrainer.log; the same columns as its parquet files, runs.attach.importers.trl), one per
  logging step;
- ``profiling/...`` timings logged straight from the trainer, with no training step: not imported.

The run's ``configs`` row holds the Trainer's arguments (TrainingArguments merged with the model's config).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import tempfile
from contextlib import contextmanager
from pathlib import Path

from runs.attach.importers import MAX_FILE_BYTES, Converted, ImportFault
from runs.attach.importers.rootfs import open_file
from runs.attach.importers.trl import REQUIRED, add_tables

TABLE = "trackio.table"
MAX_ROWS = 1_000_000  # metrics rows of one run
CONFIG_KEYS = (  # the GRPOConfig fields a run page shows, when the config holds them
    "learning_rate",
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_completion_length",
    "max_prompt_length",
    "max_steps",
    "num_train_epochs",
    "temperature",
    "beta",
    "epsilon",
    "loss_type",
    "scale_rewards",
    "reward_weights",
    "logging_steps",
    "seed",
    "use_vllm",
    "vllm_mode",
)


def runs_in(path: str | Path) -> list[str]:
    """The run names a Trackio project file holds, in the order they started."""
    with _open(Path(path)) as db:
        return _runs(db, Path(path))


def _runs(db: sqlite3.Connection, path: Path) -> list[str]:
    try:
        return [r[0] for r in db.execute("SELECT run_name FROM metrics GROUP BY run_name ORDER BY MIN(id)")]
    except sqlite3.DatabaseError as exc:
        raise ImportFault(f"{path.name}: not a Trackio project ({exc})") from None


def convert(
    path: str | Path,
    *,
    run: str | None = None,
    reward_names: list[str] | None = None,
    reward_weights: list[float] | None = None,
    num_generations: int | None = None,
) -> Converted:
    """Run ``run`` of the Trackio project file ``path`` (the only run when it holds one) as metrics and rollouts
    events, with its config."""
    path = Path(path)
    with _open(path) as db:
        return _convert(db, path, run, reward_names, reward_weights, num_generations)


def _convert(db, path: Path, run, reward_names, reward_weights, num_generations) -> Converted:
    names = _runs(db, path)
    if not names:
        raise ImportFault(f"{path.name}: the Trackio project has no logged run")
    if run is None:
        if len(names) > 1:
            shown = ", ".join(repr(n) for n in names[:20])
            raise ImportFault(f"{path.name}: {len(names)} runs ({shown}): name the one to import (option run)")
        run = names[0]
    elif run not in names:
        raise ImportFault(f"{path.name}: no run {str(run)[:80]!r} (runs: {', '.join(repr(n) for n in names[:20])})")
    out = Converted(source="trackio")
    tables: list[tuple[str, object]] = []
    metrics: dict[int, dict] = {}
    config = _config(db, path, run)
    rows = db.execute("SELECT id, metrics FROM metrics WHERE run_name = ? ORDER BY id LIMIT ?", (run, MAX_ROWS))
    for row_id, raw in rows:
        where = f"{path.name}: metrics row {row_id}"
        values = _json(raw, where)
        if not isinstance(values, dict):
            raise ImportFault(f"{where}: not a JSON object")
        step = values.get("train/global_step")
        logged = _metrics(values)
        if logged and _whole(step):
            metrics.setdefault(int(step), {}).update(logged)
        for key, value in values.items():
            if isinstance(value, dict) and value.get("_type") == TABLE:
                tables.append((f"{where} ({key})", _table(value.get("_value"), f"{where} ({key})")))
    total = config["max_steps"] if _whole(config.get("max_steps")) and config["max_steps"] > 0 else None
    out.total_steps = total
    out.every = config["logging_steps"] if _whole(config.get("logging_steps")) and config["logging_steps"] > 0 else None
    if num_generations is None and _whole(config.get("num_generations")):
        num_generations = config["num_generations"]
    last = add_tables(
        out,
        [t for t in tables if t[1] is not None],
        reward_names=reward_names,
        reward_weights=reward_weights if reward_weights is not None else _weights(config.get("reward_weights")),
        num_generations=num_generations,
        previous=None,
    )
    out.config = {"previous": last, **{k: config[k] for k in CONFIG_KEYS if k in config}}
    out.log_metrics = [
        {"type": "metrics", "step": step, "max_steps": total or 0, "metrics": m} for step, m in sorted(metrics.items())
    ]
    out.events += out.log_metrics
    out.files.append(path.name)
    out.length_known = False
    out.notes.append("Trackio's completions tables (TRL's) hold no token counts: lengths are 0, truncation unknown")
    out.events.sort(key=lambda e: (e["step"], e["type"] != "rollouts"))
    return out


@contextmanager
def _open(path: Path):
    """The project file, copied (with what Trackio's last writes left in its -wal file) into a folder of our own,
    each opened once without following links (runs.attach.importers.rootfs), and opened read-only there: SQLite
    opens a database's -wal and -shm files by name, which would follow a link. Its ``metrics`` and ``configs``
    must be tables: a view is a query SQLite would run (a recursive one runs without end)."""
    work = Path(tempfile.mkdtemp(prefix="grpo-trackio-"))
    try:
        copy = work / "project.db"
        for source, target in ((path, copy), (path.with_name(path.name + "-wal"), work / "project.db-wal")):
            if source != path and not os.path.lexists(source):
                continue
            with open_file(source) as fh:
                size = fh.seek(0, 2)
                if size > MAX_FILE_BYTES:
                    raise ImportFault(f"{source.name}: {size} bytes, more than {MAX_FILE_BYTES} a project may hold")
                fh.seek(0)
                with open(target, "wb") as out:
                    shutil.copyfileobj(fh, out, 1024 * 1024)
        try:
            db = sqlite3.connect(copy.as_uri() + "?mode=ro", uri=True)
        except sqlite3.DatabaseError as exc:
            raise ImportFault(f"{path.name}: not a SQLite file ({exc})") from None
        try:
            _check_tables(db, path)
            yield db
        finally:
            db.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_tables(db: sqlite3.Connection, path: Path) -> None:
    try:
        kinds = dict(
            db.execute(
                "SELECT name, CASE WHEN type = 'table' AND upper(sql) LIKE 'CREATE VIRTUAL%' THEN 'virtual table' "
                "ELSE type END FROM sqlite_master WHERE name IN ('metrics', 'configs')"
            ).fetchall()
        )
    except sqlite3.DatabaseError as exc:
        raise ImportFault(f"{path.name}: not a SQLite file ({exc})") from None
    for name, kind in kinds.items():
        if kind != "table":
            raise ImportFault(f"{path.name}: {name!r} is a {kind}, not a table (Trackio writes tables)")


def _config(db: sqlite3.Connection, path: Path, run: str) -> dict:
    try:
        row = db.execute("SELECT config FROM configs WHERE run_name = ? ORDER BY id DESC LIMIT 1", (run,)).fetchone()
    except sqlite3.DatabaseError:
        return {}  # an older project without configs: the run imports without them
    if row is None:
        return {}
    config = _json(row[0], f"{path.name}: the config of run {run!r}")
    return config if isinstance(config, dict) else {}


def _json(raw, where: str):
    if isinstance(raw, bytes):
        try:
            raw = raw.decode()
        except UnicodeDecodeError:
            raise ImportFault(f"{where}: not UTF-8 text") from None
    if not isinstance(raw, str):
        raise ImportFault(f"{where}: not JSON text")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise ImportFault(f"{where}: not JSON") from None


def _metrics(values: dict) -> dict:
    """transformers' names back to TRL's: ``train/reward`` -> ``reward``, ``eval/loss`` -> ``eval_loss``."""
    out = {}
    for key, value in values.items():
        if not isinstance(value, int | float) or isinstance(value, bool) or key == "train/global_step":
            continue
        if key.startswith("train/"):
            name = key[len("train/") :]
        elif key.startswith("eval/"):
            name = "eval_" + key[len("eval/") :]
        else:
            continue  # profiling/... and what the script logged itself, without a training step
        out[name] = float(value) if math.isfinite(value) else None
    return out


def _table(value, where: str):
    """A logged table's rows (a list of objects, TRL's columns) as a pyarrow table; None when it has no rows."""
    import pyarrow as pa

    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise ImportFault(f"{where}: a table's rows are not a list of objects")
    if not value:
        return None
    try:
        table = pa.Table.from_pylist(value)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise ImportFault(f"{where}: {_mixed(value) or str(exc).splitlines()[0][:160]}") from None
    missing = [c for c in REQUIRED if c not in table.column_names]
    if missing:
        raise ImportFault(f"{where}: no {', '.join(repr(c) for c in missing)} column (not TRL's completions table)")
    return table


def _kind(value) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {str: "text", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _mixed(rows: list[dict]) -> str | None:
    """The first cell whose kind differs from its column's first (Arrow refuses a column of mixed kinds)."""
    first: dict[str, str] = {}
    for i, row in enumerate(rows):
        for column, value in row.items():
            if value is None:
                continue
            kind = _kind(value)
            if first.setdefault(column, kind) != kind:
                return (
                    f"row {i}: {column!r} is {kind} ({str(value)[:40]!r}), where the rows before hold {first[column]}"
                )
    return None


def _weights(value) -> list[float] | None:
    if isinstance(value, list) and value and all(isinstance(w, int | float) and not isinstance(w, bool) for w in value):
        return [float(w) for w in value]
    return None


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
