"""JSON lines: pyarrow's reader where the file allows it, else line by line."""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from runs.datasets.importing.checks import FastPathStopped, RowChecker, checked, is_list, type_depth
from runs.datasets.importing.options import BLOCK_BYTES, ImportOptions
from runs.datasets.importing.scan import Record, scan_and_write
from runs.datasets.importing.sink import ParquetSink
from runs.datasets.importing.sniff import NOT_UTF8, json_problem, utf8_column


def _no_duplicates(pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise DuplicateKey(key)
        seen.add(key)
    return dict(pairs)


class DuplicateKey(Exception):
    pass


class NotJSONNumber(Exception):
    """NaN, Infinity or -Infinity: Python's json reads them, JSON has no such numbers."""


def _no_constants(name: str):
    raise NotJSONNumber(name)


DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constants)


def non_finite(batch: pa.RecordBatch) -> bool:
    """Whether a float column (or a list of floats) of the batch holds NaN or an infinity: pyarrow's JSON reader
    takes them, so the row by row road (which refuses them, naming the line) reads such a file."""
    for column in batch.columns:
        values = column
        while is_list(values.type):
            values = pc.list_flatten(values)
        if pa.types.is_floating(values.type) and len(values):
            if pc.any(pc.or_(pc.is_nan(values), pc.is_inf(values))).as_py():
                return True
    return False


def _parse_object(where: str, text: str, max_depth: int) -> Record:
    """The line's object, or the problem; a JSON error names its column too (``line 3, column 12``: Python's json
    counts characters from 1, as a person does)."""
    try:
        row = DECODER.decode(text)
    except json.JSONDecodeError as exc:
        return f"{where}, column {exc.colno}", json_problem(exc.msg)
    except RecursionError:
        return where, f"values are nested more than {max_depth} levels deep, the limit"
    except DuplicateKey as exc:
        return where, f"column '{exc.args[0]}' appears twice"
    except NotJSONNumber as exc:
        return where, f"not valid JSON ({exc.args[0]} is not a JSON number)"
    if not isinstance(row, dict):
        return where, f"expected a JSON object, got {type(row).__name__}"
    return where, row


def _jsonl_records(path: Path, options: ImportOptions, max_lines: int = 0) -> Iterator[Record]:
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if max_lines and lineno > max_lines:
                return
            if not raw.strip():
                continue
            line = (raw.removeprefix(codecs.BOM_UTF8) if lineno == 1 else raw).rstrip(b"\r\n")  # its own line only
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield f"line {lineno}, column {utf8_column(line, exc.start)}", NOT_UTF8
                continue
            yield _parse_object(f"line {lineno}", text, options.max_depth)


def _head_has_problems(path: Path, options: ImportOptions, lines: int = 100) -> bool:
    """Whether the first lines already break a rule: then the row by row road is taken at once (pyarrow's reader is
    never handed a file it could choke on: thousands of columns, values nested thousands deep)."""
    checker = RowChecker(options, track_kinds=False)
    for where, row in _jsonl_records(path, options, max_lines=lines):
        if isinstance(row, str):
            return True
        checker.check(where, row)
        if checker.errors:
            return True
    return False


def _without_timestamps(t: pa.DataType) -> pa.DataType:
    """pyarrow reads "2020-01-01" as a timestamp; a dataset means the text."""
    if pa.types.is_temporal(t):
        return pa.string()
    if is_list(t):
        return pa.list_(_without_timestamps(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _without_timestamps(f.type)) for f in t])
    return t


def read_jsonl(path: Path, sink: ParquetSink, options: ImportOptions) -> None:
    if options.precise or _head_has_problems(path, options):
        scan_and_write(lambda: _jsonl_records(path, options), sink, options)
        return
    try:
        read = pj.ReadOptions(block_size=BLOCK_BYTES)
        reader = pj.open_json(path, read_options=read)
        if any(type_depth(f.type) > options.max_depth for f in reader.schema):
            raise FastPathStopped  # the row checks name the line
        schema = pa.schema([pa.field(f.name, _without_timestamps(f.type)) for f in reader.schema])
        if schema != reader.schema:
            reader = pj.open_json(path, read_options=read, parse_options=pj.ParseOptions(explicit_schema=schema))
        for batch in reader:
            if non_finite(batch):
                raise FastPathStopped
            sink.write(checked(batch, options))
        return
    except (FastPathStopped, pa.ArrowException, UnicodeDecodeError):
        pass
    sink.reset()
    scan_and_write(lambda: _jsonl_records(path, options), sink, options)
