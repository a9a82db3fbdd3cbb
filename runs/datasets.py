"""Reading and validating uploaded datasets. Streams line by line; errors name the line and the column."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import IO, Iterator

MAX_ERRORS = 20


@dataclass
class DatasetError(Exception):
    errors: list[str] = field(default_factory=list)

    def __str__(self):
        return "; ".join(self.errors)


def iter_jsonl_rows(stream: IO[bytes], *, prompt_column: str = "prompt") -> Iterator[dict]:
    """Yield validated rows of a JSON-lines upload; raise DatasetError naming each bad line (up to MAX_ERRORS)."""
    errors: list[str] = []
    seen_rows = 0
    for lineno, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(f"line {lineno}: not UTF-8 text (byte {exc.start})")
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            errors.append(f"line {lineno}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(row, dict):
            errors.append(f"line {lineno}: expected a JSON object, got {type(row).__name__}")
            continue
        seen_rows += 1
        if prompt_column not in row:
            errors.append(f"line {lineno}: column '{prompt_column}' is missing")
        elif not isinstance(row[prompt_column], str) or not row[prompt_column].strip():
            errors.append(f"line {lineno}: column '{prompt_column}' must be non-empty text")
        if len(errors) >= MAX_ERRORS:
            break
        if not errors:
            yield row
    if errors:
        raise DatasetError(errors)
    if seen_rows == 0:
        raise DatasetError(["the file has no rows"])
