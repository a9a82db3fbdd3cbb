"""Arrow sources (Parquet, Hugging Face datasets): each batch checked, a batch that fails checked row by row."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from runs.datasets.importing.checks import FastPathStopped, RowChecker, checked
from runs.datasets.importing.options import DatasetError, ImportOptions
from runs.datasets.importing.sink import ParquetSink


def _schema_problems(schema: pa.Schema, options: ImportOptions) -> list[str]:
    errors, seen = [], set()
    for name in schema.names:
        if name in seen:
            errors.append(f"column '{name}' appears twice")
        seen.add(name)
    if len(schema.names) > options.max_columns:
        errors.append(f"{len(schema.names)} columns; the limit is {options.max_columns}")
    if not errors and options.prompt_column not in schema.names:
        errors.append(
            f"column '{options.prompt_column}' is missing (columns: {', '.join(schema.names)}); name the prompt column"
        )
    return errors


def convert_batches(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, sink: ParquetSink, options: ImportOptions
) -> None:
    """Arrow sources (Parquet, Hugging Face): check each batch; a batch that fails is checked row by row."""
    problems = _schema_problems(schema, options)
    if problems:
        raise DatasetError(problems)
    checker = RowChecker(options, track_kinds=False)  # typed sources cannot mix types
    offset = 0
    for batch in batches:
        bad_text = _not_utf8_columns(batch)
        if bad_text:
            for name in bad_text:
                checker.error(
                    f"rows {offset + 1} to {offset + batch.num_rows}", f"column '{name}' holds text that is not UTF-8"
                )
            checker.rows += batch.num_rows
            offset += batch.num_rows
            if checker.full:
                break
            continue
        try:
            good = checked(batch, options)
        except FastPathStopped:
            before = len(checker.errors)
            for i, row in enumerate(batch.to_pylist()):
                checker.check(f"row {offset + i + 1}", row)
            if len(checker.errors) == before:  # a check that only the vectorised road makes: name the rows
                checker.error(
                    f"rows {offset + 1} to {offset + batch.num_rows}",
                    f"column '{options.prompt_column}' has values that cannot be used as prompts",
                )
            if checker.full:
                break
        else:
            checker.rows += batch.num_rows
            if not checker.errors:
                sink.write(good)
        offset += batch.num_rows
    checker.prompt_seen = True
    checker.raise_if_any()


def _not_utf8_columns(batch: pa.RecordBatch) -> list[str]:
    """Parquet may carry any bytes in a text column; pyarrow checks them only when asked."""
    try:
        batch.validate(full=True)
        return []
    except pa.ArrowInvalid:
        bad = []
        for name, column in zip(batch.schema.names, batch.columns):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                bad.append(name)
        return bad or batch.schema.names[:1]
