"""The Parquet output of an import."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from runs.datasets.importing.checks import column_kind
from runs.datasets.importing.options import EXPANSION_FREE_BYTES, MAX_EXPANSION, DatasetError, ImportResult


class ParquetSink:
    """Appends checked batches to the version's Parquet file (one row group each, so a page of rows reads one)."""

    def __init__(self, dest: Path, compressed_size: int = 0, progress_path: str = ""):
        self.dest, self.compressed_size, self.progress_path = dest, compressed_size, progress_path
        self.noted_at = 0.0
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None
        self.rows = self.nbytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if self.writer is None:
            self.schema = batch.schema
            self.writer = pq.ParquetWriter(self.dest, batch.schema, compression="zstd")
        self.writer.write_batch(batch)
        self.rows += batch.num_rows
        self.nbytes += batch.nbytes
        if self.progress_path and time.monotonic() - self.noted_at > 0.5:
            Path(self.progress_path).write_text(str(self.rows))
            self.noted_at = time.monotonic()
        if (
            self.compressed_size
            and self.nbytes > EXPANSION_FREE_BYTES
            and self.nbytes > MAX_EXPANSION * self.compressed_size
        ):
            raise DatasetError(
                [f"the data expands more than {MAX_EXPANSION} times its file's size; it looks like a compression bomb"]
            )

    def reset(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.dest.unlink(missing_ok=True)
        self.writer, self.schema, self.rows, self.nbytes = None, None, 0, 0

    def finish(self, fmt: str) -> ImportResult:
        if self.writer is not None:
            self.writer.close()
        if not self.rows:
            raise DatasetError(["the file has no rows"])
        return ImportResult(
            format=fmt,
            columns=self.schema.names,
            row_count=self.rows,
            nbytes=self.nbytes,
            column_types={f.name: column_kind(f.type) for f in self.schema},
        )
