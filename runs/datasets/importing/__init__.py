"""Reading datasets into an immutable Parquet file, with errors that name the line or row and the column.

Every format takes the same road: a reader yields Arrow record batches, each batch is checked with vectorised
compute and appended to a Parquet file, so a file of any size passes through in bounded memory. When that fast road
stops (pyarrow refuses a line, or a check fails), a plain Python scan of the same input finds the lines or rows and
the columns to name, up to MAX_ERRORS of them. Nothing is kept when it finds any: the caller deletes the output.

JSON lines and CSV name the line of the file (the header is line 1); JSON arrays, Parquet and Hugging Face datasets
name the row (1-based). CSV cells are read as text exactly as written: a cell such as ``=1+1`` stays that text and is
never evaluated.

The package, by part: ``options`` (ImportOptions, ImportResult, DatasetError, the limits), ``sniff`` (file types,
UTF-8, gzip and zip), ``checks`` (vectorised and row by row), ``sink`` (the Parquet output), ``scan`` (the precise
road for text formats), one module per format (``jsonl``, ``jsondoc``, ``csvfile``, ``parquet``; ``batches`` for
Arrow sources, ``hf`` for Hugging Face datasets), and here the entry points.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from runs.datasets.importing.batches import convert_batches
from runs.datasets.importing.checks import (
    column_kind,
    messages_ok,
    prompt_ok,
    prompt_problem,
    text_ok,
    value_problem,
)
from runs.datasets.importing.csvfile import read_csv
from runs.datasets.importing.hf import hf_batches, hub_offline, load_hf
from runs.datasets.importing.jsondoc import read_json
from runs.datasets.importing.jsonl import read_jsonl
from runs.datasets.importing.options import MAX_ERRORS, DatasetError, ImportOptions, ImportResult
from runs.datasets.importing.parquet import read_parquet
from runs.datasets.importing.sink import ParquetSink
from runs.datasets.importing.sniff import (
    FORMAT_NAMES,
    expect,
    first_utf8_problem,
    gunzip,
    is_blank,
    type_from_name,
    unzip,
)

READERS = {"jsonl": read_jsonl, "json": read_json, "csv": read_csv, "parquet": read_parquet}


def import_file(source: Path, *, filename: str, dest: Path, workdir: Path, options: ImportOptions) -> ImportResult:
    """Validate the file ``source`` (named ``filename`` by its uploader) and write its rows to ``dest`` as Parquet.

    ``workdir`` takes decompressed copies; the caller removes it, and removes ``dest`` when this raises."""
    size = source.stat().st_size
    if size > options.max_bytes:
        raise DatasetError([f"{filename} is {size} bytes; the limit is {options.max_bytes}"])
    compression, fmt = type_from_name(filename)
    if compression == "gzip":
        expect(source, filename, "gzip", "is not gzip-compressed")
        source = gunzip(source, workdir / "unpacked", filename, options.max_bytes)
    elif compression == "zip":
        expect(source, filename, "zip", "is not a zip archive")
        source, fmt = unzip(source, workdir / "unpacked", filename, options.max_bytes)
    if fmt == "parquet":
        expect(source, filename, "parquet", "is not a Parquet file")
    else:
        expect(source, filename, "text", f"is not {FORMAT_NAMES[fmt]}")
        if is_blank(source):
            raise DatasetError([f"{filename} is empty"])
        problem = first_utf8_problem(source)
        if problem and fmt == "json":
            raise DatasetError([": ".join(problem)])
        if problem:  # whatever pyarrow would make of it: the row by row road names every line that is not UTF-8
            options = dataclasses.replace(options, precise=True)
    # .gz and .zip were capped while decompressing; Parquet decompresses as it is read, so the sink watches it
    sink = ParquetSink(
        dest, compressed_size=size if fmt == "parquet" and not compression else 0, progress_path=options.progress_path
    )
    READERS[fmt](source, sink, options)
    return sink.finish(fmt)


def import_arrow(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, *, dest: Path, options: ImportOptions, fmt: str = "hf"
) -> ImportResult:
    """Validate Arrow batches (a Hugging Face dataset) and write them to ``dest`` as Parquet; errors name the row."""
    sink = ParquetSink(dest, progress_path=options.progress_path)
    convert_batches(batches, schema, sink, options)
    return sink.finish(fmt)


def save_stream(stream, out_path: Path, max_bytes: int) -> Path:
    """Write an uploaded stream to ``out_path`` in chunks, stopping at the size limit."""
    chunks = stream.chunks() if hasattr(stream, "chunks") else iter(lambda: stream.read(1024**2), b"")
    total = 0
    with open(out_path, "wb") as out:
        for chunk in chunks:
            total += len(chunk)
            if total > max_bytes:
                raise DatasetError([f"the file is larger than {max_bytes} bytes, the limit"])
            out.write(chunk)
    return out_path


__all__ = [
    "MAX_ERRORS",
    "READERS",
    "DatasetError",
    "ImportOptions",
    "ImportResult",
    "column_kind",
    "hf_batches",
    "hub_offline",
    "import_arrow",
    "import_file",
    "load_hf",
    "messages_ok",
    "prompt_ok",
    "prompt_problem",
    "read_csv",
    "read_json",
    "read_jsonl",
    "read_parquet",
    "save_stream",
    "text_ok",
    "value_problem",
]
