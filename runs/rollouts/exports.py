"""Rollouts out of the database: JSON lines or Parquet with the browser's filters, and the rows of a rejection-sampled
SFT dataset. Rows are read in chunks (a server-side cursor on PostgreSQL), so an export of millions never sits in
memory whole."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from runs.models import Run
from runs.rollouts.filters import filtered, sorted_rows
from runs.rollouts.labels import labels_of_rows

EXPORT_FIELDS = (
    "step",
    "index",
    "group",
    "prompt",
    "completion",
    "rewards",
    "reward",
    "advantage",
    "length",
    "truncated",
    "zero_std",
    "reflections",
    "columns",
)
CHUNK_ROWS = 2000
PARQUET_BATCH_ROWS = 10_000


LABEL_FIELDS = ("name", "on", "author", "note", "span", "created_at")


def export_rows(run: Run, data: dict) -> Iterator[dict]:
    """The filtered rows in the browser's order, per-function rewards by name, each with its labels (its own and its
    group's)."""
    names = run.reward_names
    qs = sorted_rows(filtered(run, data), data.get("sort") or "adv_desc")
    chunk: list[dict] = []

    def flush():
        on = labels_of_rows(run, chunk)
        for row in chunk:
            row["rewards"] = dict(zip(names, row["rewards"]))
            row["labels"] = [{k: label[k] for k in LABEL_FIELDS} for label in on[row.pop("id")]]
            yield {"run": run.pk, **row}

    for row in qs.values("id", *EXPORT_FIELDS).iterator(chunk_size=CHUNK_ROWS):
        chunk.append(row)
        if len(chunk) >= CHUNK_ROWS:
            yield from flush()
            chunk = []
    yield from flush()


def jsonl_chunks(run: Run, data: dict) -> Iterator[bytes]:
    lines = []
    for row in export_rows(run, data):
        lines.append(json.dumps(row, ensure_ascii=False))
        if len(lines) >= CHUNK_ROWS:
            yield ("\n".join(lines) + "\n").encode()
            lines = []
    if lines:
        yield ("\n".join(lines) + "\n").encode()


def _schema(run: Run) -> pa.Schema:
    return pa.schema(
        [
            ("run", pa.int64()),
            ("step", pa.int32()),
            ("index", pa.int32()),
            ("group", pa.int32()),
            ("prompt", pa.string()),
            ("completion", pa.string()),
            ("rewards", pa.struct([(name, pa.float64()) for name in run.reward_names])),
            ("reward", pa.float64()),
            ("advantage", pa.float64()),
            ("length", pa.int32()),
            ("truncated", pa.bool_()),
            ("zero_std", pa.bool_()),
            ("reflections", pa.list_(pa.string())),
            ("columns", pa.string()),  # the dataset row's columns vary in type between datasets: kept as JSON text
            (
                "labels",
                pa.list_(
                    pa.struct(
                        [
                            ("name", pa.string()),
                            ("on", pa.string()),
                            ("author", pa.string()),
                            ("note", pa.string()),
                            ("span", pa.list_(pa.int64())),
                            ("created_at", pa.string()),
                        ]
                    )
                ),
            ),
        ]
    )


def write_parquet(run: Run, data: dict, out) -> int:
    """Write the filtered rows to ``out`` (a path or a binary file) as Parquet; return how many."""
    schema = _schema(run)
    n = 0
    batch: list[dict] = []
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        for row in export_rows(run, data):
            row["columns"] = json.dumps(row["columns"], ensure_ascii=False)
            batch.append(row)
            if len(batch) >= PARQUET_BATCH_ROWS:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                n, batch = n + len(batch), []
        if batch or not n:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            n += len(batch)
    return n


def parquet_chunks(run: Run, data: dict, block: int = 1 << 20) -> Iterator[bytes]:
    """The Parquet file in blocks (written to a temporary file first: its footer comes last)."""
    with tempfile.TemporaryFile() as fh:
        write_parquet(run, data, fh)
        fh.seek(0)
        while chunk := fh.read(block):
            yield chunk


def write_sft_jsonl(run: Run, data: dict, threshold: float, path: Path) -> int:
    """Rejection sampling: the filtered completions whose total reward is at least ``threshold``, once per distinct
    (prompt, completion), as TRL's prompt-completion SFT format. Returns how many rows."""
    qs = filtered(run, {**data, "reward_min": max(threshold, data.get("reward_min") or threshold)})
    seen: set[int] = set()
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for prompt, completion in (
            qs.order_by("step", "index").values_list("prompt", "completion").iterator(chunk_size=CHUNK_ROWS)
        ):
            key = hash((prompt, completion))
            if key in seen:
                continue
            seen.add(key)
            fh.write(json.dumps({"prompt": prompt, "completion": completion}, ensure_ascii=False) + "\n")
            n += 1
    return n
