"""What a token shard an attach client uploads must be before it is stored as ``<run_dir>/tokens/step-NNNNNN.parquet``
(the token view, runs.rollouts.tokens, reads it as the training program's own): a Parquet file with exactly the
columns and types of grpo_web_attach.tokens.shard_schema, every row of it computed at the optimizer step it is sent
for, and per completion as many values as tokens. Each refusal names the column, and the row where one is at fault.

No Django here: the limits come in as arguments."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from grpo_web_attach.tokens import shard_name, shard_schema

MAX_STEP = 2**31 - 1  # the shard's int32 step columns
KEYS = ("step", "update_step", "index", "group", "completion")  # integers, one per completion, never null
PER_TOKEN = ("token_ids", "tokens", "mask")  # a list per completion, never null: the completion's tokens
OPTIONAL = ("logprob", "old_logprob", "sampling_logprob", "ref_logprob", "entropy", "ratio")
OPTIONAL += ("clipped_low", "clipped_high", "clipped")  # a list per completion as long as its tokens, or null


class ShardRefused(ValueError):
    """An upload that is not a token shard of this step; ``status``: 400, or 413 when it is too large."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _first_line(exc: Exception) -> str:
    return (str(exc).splitlines() or [exc.__class__.__name__])[0][:160]


def read_shard(data: bytes, step: int, *, num_generations: int | None, max_decoded_bytes: int):
    """The table of the shard ``data`` of optimizer step ``step``, checked (ShardRefused names what is wrong).
    ``num_generations``: the run's G, when it is known (each row's group and place in it follow from its index);
    ``max_decoded_bytes``: what its columns may take once decompressed, as the file's own metadata declares."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if not 1 <= step <= MAX_STEP:
        raise ShardRefused(f"step: an optimizer step from 1 to {MAX_STEP}, not {step}")
    if len(data) < 12 or data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise ShardRefused("body: not a Parquet file (one starts and ends with PAR1)")
    try:
        file = pq.ParquetFile(pa.BufferReader(data))
        meta = file.metadata
        declared = sum(
            meta.row_group(g).column(c).total_uncompressed_size
            for g in range(meta.num_row_groups)
            for c in range(meta.num_columns)
        )
        got = file.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ShardRefused(f"body: not a readable Parquet file ({_first_line(exc)})") from None
    expected = shard_schema()
    missing = [n for n in expected.names if n not in got.names]
    extra = [n for n in got.names if n not in expected.names]
    if missing or extra:
        raise ShardRefused(
            "columns: a token shard has exactly "
            + ", ".join(expected.names)
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; not one of them: {', '.join(n[:60] for n in extra[:10])}" if extra else "")
        )
    if got.names != expected.names:
        raise ShardRefused("columns: in the order " + ", ".join(expected.names))
    for field in expected:
        if not got.field(field.name).type.equals(field.type):
            raise ShardRefused(f"column {field.name!r}: {field.type}, not {got.field(field.name).type}")
    if declared > max_decoded_bytes:
        raise ShardRefused(f"body: its columns take {declared} bytes decompressed, more than {max_decoded_bytes}", 413)
    if meta.num_rows == 0:
        raise ShardRefused("body: the shard holds no rows")
    try:
        table = file.read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ShardRefused(f"body: not a readable Parquet file ({_first_line(exc)})") from None
    if not table.schema.equals(expected):  # the columns' nullability too
        raise ShardRefused("columns: not the schema of a token shard (grpo_web_attach.tokens.shard_schema)")

    def fault(column: str, bad, what: str, values=None) -> None:
        rows = np.flatnonzero(np.asarray(bad))
        if rows.size:
            row = int(rows[0])
            found = f"{values[row]}, " if values is not None else ""
            raise ShardRefused(f"row {row}, column {column!r}: {found}{what}")

    keys = {}
    for name in (*KEYS, *PER_TOKEN):
        fault(name, table[name].is_null().to_numpy(zero_copy_only=False), "missing (null)")
    for name in KEYS:
        keys[name] = table[name].to_numpy().astype(np.int64)
    step_of, index = keys["update_step"], keys["index"]
    fault("update_step", step_of != step, f"not the optimizer step the shard is sent for ({step})", step_of)
    fault(
        "step",
        (keys["step"] < 1) | (keys["step"] > step),
        f"not a generation batch's step from 1 to {step}",
        keys["step"],
    )
    fault("index", index < 0, "not a rollout's index in its batch (from 0)", index)
    if num_generations:
        fault("group", keys["group"] != index // num_generations, f"not index // {num_generations}", keys["group"])
        fault(
            "completion",
            keys["completion"] != index % num_generations,
            f"not index % {num_generations}",
            keys["completion"],
        )
    else:
        fault("group", keys["group"] < 0, "not a group number (from 0)", keys["group"])
        fault("completion", keys["completion"] < 0, "not a place in the group (from 0)", keys["completion"])
    lengths = pc.list_value_length(table["token_ids"]).to_numpy(zero_copy_only=False)
    for name in (*PER_TOKEN[1:], *OPTIONAL):
        column = table[name]
        values = pc.list_value_length(column).to_numpy(zero_copy_only=False)  # NaN where the row's list is null
        present = ~column.is_null().to_numpy(zero_copy_only=False)
        fault(name, present & (values != lengths), "not one value per token of the completion (token_ids)")
    return table


def store_shard(directory: Path, step: int, data: bytes) -> Path:
    """The checked shard's bytes as ``<directory>/step-NNNNNN.parquet``, in place of any earlier one, whole or not at
    all: a reader never sees half a file."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / shard_name(step)
    tmp = directory / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def drop_shards_after(directory: Path, step: int) -> None:
    """The shards of the optimizer steps after ``step`` (a run trained again from its checkpoint at ``step``)."""
    if not directory.is_dir():
        return
    for path in directory.glob("step-*.parquet"):
        number = path.name[len("step-") : -len(".parquet")]
        if number.isdigit() and int(number) > step:
            path.unlink(missing_ok=True)
