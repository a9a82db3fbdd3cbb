"""The event log: an append-only JSON-lines file written by the training process and read by the supervisor.

Each line is one event: ``{"type": ..., "ts": ..., ...}``. Writers flush after every event so a reader (or a
later ingest after a crash) sees every complete line; a torn last line is left for the next read.
No Django here.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path


def clean(value):
    """JSON has no NaN/inf: store them as None (nested lists and dicts included)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


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


def read_events(path: str | Path, offset: int = 0) -> tuple[list[dict], int]:
    """Complete events from byte ``offset`` on, and the offset after the last complete line."""
    path = Path(path)
    if not path.exists():
        return [], offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    events = [json.loads(line) for line in data[: end + 1].splitlines() if line.strip()]
    return events, offset + end + 1


def file_size(path: str | Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
