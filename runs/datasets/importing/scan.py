"""The precise road for the text formats: every row checked in Python, then written."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from runs.datasets.importing.checks import RowChecker
from runs.datasets.importing.options import ImportOptions
from runs.datasets.importing.sink import ParquetSink

SLOW_CHUNK_ROWS = 20_000
Record = tuple[str, "dict | str"]  # (where, row) or (where, problem)


def scan_and_write(records, sink: ParquetSink, options: ImportOptions) -> None:
    """The precise road for text formats: check every row in Python, then (no problems) write them in chunks.

    Taken only when the fast road stopped, so mostly to name problems; a clean file gets here when pyarrow cannot
    stream it (a column that starts empty, a column that appears late, a byte-order mark...)."""
    checker = RowChecker(options)
    schema = None
    for rows, first, last in _chunks(records(), checker):
        if checker.errors:
            if checker.full:
                break
            continue
        try:
            table_schema = _table(rows).schema
            schema = (
                table_schema
                if schema is None
                else pa.unify_schemas([schema, table_schema], promote_options="permissive")
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            checker.error(f"{first} to {last}", _arrow_column_problem(rows, exc))
    checker.raise_if_any()
    sink.reset()
    quiet = RowChecker(options, track_kinds=False)
    for rows, _, _ in _chunks(records(), quiet):
        sink.write(pa.RecordBatch.from_pylist(rows, schema=schema))


def _table(rows: list[dict]) -> pa.Table:
    """Rows to a table with every key any row has (pa.Table.from_pylist takes the first row's keys only)."""
    keys = dict.fromkeys(k for row in rows for k in row)
    return pa.table({k: pa.array([row.get(k) for row in rows]) for k in keys})


def _chunks(records: Iterator[Record], checker: RowChecker):
    rows, first = [], None
    where = None
    for where, row in records:
        if isinstance(row, str):
            checker.error(where, row)
            continue
        first = first or where
        rows.append(checker.check(where, row))
        if len(rows) >= SLOW_CHUNK_ROWS:
            yield rows, first, where
            rows, first = [], None
        if checker.full:
            break
    if rows:
        yield rows, first, where


def _arrow_column_problem(rows: list[dict], exc: Exception) -> str:
    columns = dict.fromkeys(k for r in rows for k in r)
    for column in columns:
        try:
            pa.array([r.get(column) for r in rows])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as col_exc:
            return f"column '{column}' mixes types inside its lists or objects ({col_exc})"
    return f"the rows cannot be stored ({exc})"
