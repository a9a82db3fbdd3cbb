"""A Parquet file, read in batches sized by its rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from runs.datasets.importing.batches import convert_batches
from runs.datasets.importing.options import (
    BLOCK_BYTES,
    EXPANSION_FREE_BYTES,
    MAX_EXPANSION,
    DatasetError,
    ImportOptions,
)
from runs.datasets.importing.sink import ParquetSink


def read_parquet(path: Path, sink: ParquetSink, options: ImportOptions) -> None:
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError([f"not a valid Parquet file ({exc})"]) from None
    meta = pf.metadata
    decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if decoded > EXPANSION_FREE_BYTES and decoded > MAX_EXPANSION * path.stat().st_size:
        raise DatasetError(
            [
                f"the Parquet file expands more than {MAX_EXPANSION} times when decompressed; "
                f"it looks like a compression bomb"
            ]
        )
    if meta.num_rows == 0:
        raise DatasetError(["the file has no rows"])
    per_row = max(decoded // max(meta.num_rows, 1), 1)
    batch_rows = min(max(BLOCK_BYTES * 2 // per_row, 1024), 65536)
    try:
        convert_batches(pf.iter_batches(batch_size=batch_rows), schema, sink, options)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError([f"the Parquet file cannot be read ({exc})"]) from None
