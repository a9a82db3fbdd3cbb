"""CSV: every cell read as text, exactly as written."""

from __future__ import annotations

import codecs
import csv
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.csv as pcsv

from runs.datasets.importing.checks import FastPathStopped, checked
from runs.datasets.importing.options import BLOCK_BYTES, DatasetError, ImportOptions
from runs.datasets.importing.scan import Record, scan_and_write
from runs.datasets.importing.sink import ParquetSink
from runs.datasets.importing.sniff import NOT_UTF8, utf8_column


def _csv_header(path: Path, options: ImportOptions) -> list[str]:
    with open(path, "rb") as fh:
        first = fh.readline()
    first = first.removeprefix(codecs.BOM_UTF8)
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError([f"line 1, column {utf8_column(first, exc.start)}: {NOT_UTF8}"]) from None
    header = next(csv.reader([text]), [])
    if len(header) > options.max_columns:
        raise DatasetError([f"line 1: {len(header)} columns; the limit is {options.max_columns}"])
    errors, seen = [], {}
    for i, name in enumerate(header, start=1):
        if not name.strip():
            errors.append(f"line 1: column {i} has no name")
        elif name in seen:
            errors.append(f"line 1: column '{name}' appears twice (columns {seen[name]} and {i})")
        seen.setdefault(name, i)
    if errors:
        raise DatasetError(errors)
    return header


def _csv_records(path: Path, header: list[str]) -> Iterator[Record]:
    problems: list[tuple[str, str]] = []

    def lines():
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                line = raw.removeprefix(codecs.BOM_UTF8) if lineno == 1 else raw
                try:
                    yield line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    problems.append((f"line {lineno}, column {utf8_column(line, exc.start)}", NOT_UTF8))
                    yield line.decode("utf-8", errors="replace")

    reader = csv.reader(lines())
    previous = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            yield f"line {reader.line_num}", f"not valid CSV ({exc})"
            break
        start, previous = previous + 1, reader.line_num
        while problems:
            yield problems.pop(0)
        if start == 1 or not fields:
            continue
        if len(fields) != len(header):
            yield f"line {start}", f"expected {len(header)} fields ({', '.join(header)}), got {len(fields)}"
            continue
        yield f"line {start}", dict(zip(header, fields))


def read_csv(path: Path, sink: ParquetSink, options: ImportOptions) -> None:
    header = _csv_header(path, options)
    if options.precise:
        csv.field_size_limit(2**31 - 1)
        scan_and_write(lambda: _csv_records(path, header), sink, options)
        return
    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(block_size=BLOCK_BYTES),
            parse_options=pcsv.ParseOptions(newlines_in_values=True),
            # every cell is text, as written: no type guessing, no formulas
            convert_options=pcsv.ConvertOptions(
                column_types={name: pa.string() for name in header},
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        for batch in reader:
            sink.write(checked(batch, options))
        return
    except (FastPathStopped, pa.ArrowException):
        pass
    sink.reset()
    csv.field_size_limit(2**31 - 1)  # long prompts are normal; the size limit is the upload's
    scan_and_write(lambda: _csv_records(path, header), sink, options)
