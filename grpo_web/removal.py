"""Deleting what a user owns: what a delete removes, said before it happens, and why it may not happen.

Every delete (a run, a dataset, a reward function, a model) is planned first: the confirmation page lists the plan's
rows and folders, and the delete refuses with the plan's reasons (another run depends on it, it is still training).
Files are removed only inside the data folder, whatever a stored path says.

This module sits below both ``runs`` and ``rewards`` (each deletes its own objects), so it imports only Django.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from ninja.responses import Status


class DeleteRefused(Exception):
    """The delete was not done; ``reasons`` say why, each naming what stands in the way."""

    def __init__(self, reasons: list[str]):
        super().__init__("; ".join(reasons))
        self.reasons = reasons


@dataclass
class Removal:
    """What deleting ``label`` removes: ``rows`` ("1 run", "4,096 rollouts"...), ``paths`` (files and folders under
    the data folder), and ``refusals`` (why it cannot be deleted now; empty when it can)."""

    label: str
    rows: list[str] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    def check(self) -> None:
        if self.refusals:
            raise DeleteRefused(self.refusals)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def inside_data_dir(path) -> Path | None:
    """``path`` resolved, when it lies inside the data folder (and is not the data folder itself); None otherwise, so
    a stored path that points elsewhere (or a link out of it) is never deleted."""
    try:
        resolved = Path(path).resolve()
        root = Path(settings.DATA_DIR).resolve()
    except (OSError, ValueError, RuntimeError):
        return None
    return resolved if resolved != root and resolved.is_relative_to(root) else None


def existing(paths) -> list[Path]:
    """The paths, as they will be removed: only those inside the data folder that exist, each once."""
    found = (inside_data_dir(p) for p in paths)
    return list(dict.fromkeys(p for p in found if p is not None and p.exists()))


def remove_paths(paths: list[Path]) -> None:
    """Delete files and folders of a plan; each is checked again against the data folder just before."""
    for path in paths:
        resolved = inside_data_dir(path)
        if resolved is None:
            continue
        if resolved.is_dir() and not resolved.is_symlink():
            shutil.rmtree(resolved, ignore_errors=True)
        else:
            resolved.unlink(missing_ok=True)


def delete_answer(delete) -> Status:
    """The API's answer to a DELETE: 204 once ``delete()`` is done, 409 with the reasons when it refused."""
    try:
        delete()
    except DeleteRefused as exc:
        return Status(409, {"errors": exc.reasons})
    return Status(204, None)
