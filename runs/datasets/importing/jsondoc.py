"""A JSON document: a top-level array of objects, read one element at a time."""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Iterator

from runs.datasets.importing.jsonl import DECODER, DuplicateKey, NotJSONNumber, read_jsonl
from runs.datasets.importing.options import ImportOptions
from runs.datasets.importing.scan import Record, scan_and_write
from runs.datasets.importing.sink import ParquetSink
from runs.datasets.importing.sniff import first_utf8_problem, json_problem

MAX_JSON_ROW_CHARS = 64 * 1024**2  # one element of a JSON array; past this an unfinished element is an error
NEWLINE = "\n"


def _json_array_records(path: Path, max_depth: int) -> Iterator[Record]:
    """Elements of a top-level JSON array, one at a time (the file is never read whole)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    buf, pos, lines_before, eof, index = "", 0, 0, False, 0
    columns_before = 0  # characters of the current line before buf (a line can span many reads)

    def more() -> bool:
        nonlocal buf, pos, lines_before, columns_before, eof
        if eof:
            return False
        chunk = fh.read(1024**2)
        eof = not chunk
        try:
            text = decoder.decode(chunk, final=eof)
        except UnicodeDecodeError:
            # the importer checks the whole file first (sniff.first_utf8_problem), so this is a file changed since
            raise _Stop(*(first_utf8_problem(path) or ("the file", "not UTF-8 text"))) from None
        dropped = buf[:pos]
        if NEWLINE in dropped:
            lines_before += dropped.count(NEWLINE)
            columns_before = len(dropped) - dropped.rindex(NEWLINE) - 1
        else:
            columns_before += len(dropped)
        buf, pos = buf[pos:] + text, 0
        return True

    def line_at(p: int) -> str:
        return f"line {lines_before + buf.count(NEWLINE, 0, p) + 1}"

    def position(p: int) -> str:
        """Line and column of buf[p] as a person counts them: from 1, in characters."""
        start = buf.rfind(NEWLINE, 0, p) + 1
        return f"{line_at(p)}, column {p - start + 1 + (columns_before if start == 0 else 0)}"

    def skip_ws() -> None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf) or not more():
                return

    with open(path, "rb") as fh:
        try:
            skip_ws()
            if buf[pos : pos + 1] != "[":
                raise _Stop(position(pos), "expected a JSON array of objects, or one object per line")
            pos += 1
            while True:
                skip_ws()
                if buf[pos : pos + 1] == "]":
                    pos += 1
                    skip_ws()
                    if pos < len(buf):
                        raise _Stop(position(pos), "unexpected text after the end of the JSON array")
                    return
                if index:
                    if buf[pos : pos + 1] != ",":
                        raise _Stop(position(pos), "not valid JSON (expected ',' or ']' between rows)")
                    pos += 1
                    skip_ws()
                index += 1
                while True:
                    try:
                        value, end = DECODER.raw_decode(buf, pos)
                        if end >= len(buf) and not eof and not isinstance(value, dict):
                            raise json.JSONDecodeError("incomplete", buf, end)  # a number may go on
                        break
                    except json.JSONDecodeError as exc:
                        if len(buf) - pos > MAX_JSON_ROW_CHARS or not more():
                            raise _Stop(position(exc.pos), json_problem(exc.msg)) from None
                    except DuplicateKey as exc:
                        raise _Stop(f"row {index}", f"column '{exc.args[0]}' appears twice") from None
                    except NotJSONNumber as exc:
                        raise _Stop(f"row {index}", f"not valid JSON ({exc.args[0]} is not a JSON number)") from None
                    except RecursionError:
                        raise _Stop(
                            f"row {index}", f"values are nested more than {max_depth} levels deep, the limit"
                        ) from None
                pos = end
                if isinstance(value, dict):
                    yield f"row {index}", value
                else:
                    yield f"row {index}", f"expected a JSON object, got {type(value).__name__}"
        except _Stop as stop:
            yield stop.where, stop.problem


class _Stop(Exception):
    def __init__(self, where: str, problem: str):
        super().__init__(problem)
        self.where, self.problem = where, problem


def read_json(path: Path, sink: ParquetSink, options: ImportOptions) -> None:
    """A JSON array of objects; a .json file holding one object per line is read as JSON lines."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"{"):
        return read_jsonl(path, sink, options)
    scan_and_write(lambda: _json_array_records(path, options.max_depth), sink, options)
