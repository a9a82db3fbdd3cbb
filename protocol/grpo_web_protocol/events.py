"""The event log: an append-only JSON-lines file written by the training process and read by the supervisor.

Each line is one event: ``{"type": ..., "ts": ..., ...}``. Writers flush after every event so a reader (or a
later ingest after a crash) sees every complete line; a torn last line is left for the next read.
No Django here.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

import orjson
from grpo_web_attach.capture import clean  # JSON has no NaN/inf: None, nested too (one rule, both logs)


class EventWriter:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")

    def write(self, type_: str, **fields) -> None:
        event = {"type": type_, "ts": time.time(), **fields}
        self._fh.write(json.dumps(clean(event), allow_nan=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class NullEventWriter:
    """What a training process that is not rank 0 writes to: nothing. Every rank runs the same capture (it gathers
    across processes), but only rank 0 writes the event log."""

    path = None

    def write(self, type_: str, **fields) -> None:
        pass

    def close(self) -> None:
        pass


def read_events(path: str | Path, offset: int = 0, limit: int | None = None) -> tuple[list[dict], int]:
    """Complete events from byte ``offset`` on, and the offset after the last complete line.

    With ``limit``, about that many bytes at most (more only when a single line is longer)."""
    lines, offset = read_lines(path, offset, limit)
    return [parse_event(line) for line in lines], offset


def read_lines(path: str | Path, offset: int = 0, limit: int | None = None) -> tuple[list[bytes], int]:
    """``read_events`` without the parsing: the complete lines, for a reader that parses them as it goes."""
    path = Path(path)
    if not path.exists():
        return [], offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(limit) if limit else fh.read()
        if limit and len(data) == limit and b"\n" not in data:
            data += fh.read()
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    return [line for line in data[: end + 1].splitlines() if line.strip()], offset + end + 1


def parse_event(line: bytes, *, strict: bool = False):
    """orjson is about twice as fast on rollout batches; json takes the lines it refuses (a lone surrogate escape,
    \\ud800, which a model can emit). orjson reads integers up to 64 bits exactly (uint64 included), everything a
    dataset column (Arrow) can hold; a larger one would come back as a float.

    ``strict``: a line from outside (an attach client's batch): NaN and Infinity, which json would take, and numbers
    past a double's range (1e400, which json makes Infinity) raise ValueError as orjson's refusal does. The result is whatever JSON value the line holds: checking it is the
    caller's."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        if strict:
            return _scrub(json.loads(line, parse_constant=_no_constant, parse_float=_finite_float))
        return _scrub(json.loads(line))


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: json would make it Infinity
        raise ValueError(f"{text[:40]} is past the range of a double")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")  # only lone ones are left once json has joined the pairs


def _scrub(value):
    """Lone surrogates (a model can emit half a pair) become U+FFFD: no text column of a database stores them."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def file_size(path: str | Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
