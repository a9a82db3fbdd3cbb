"""Files under the import roots, opened so that nothing read leads out of them.

A path is not checked and then opened by name (a link swapped in between would be followed): it is opened once,
one component at a time under its parent folder's descriptor (``os.open(name, dir_fd=...)``, openat), each with
``O_NOFOLLOW``, starting from the import root's own descriptor. A link at any component below the root is refused,
and what was opened is checked by its descriptor: a regular file, with one name (a hard link makes a file outside
the roots readable under a name inside them), on the root's device.

The child process that runs a converter (runs.attach.importers.isolated) ``confine``s itself to the roots; unconfined
(a converter called directly, as the tests and bench do), a file's own folder is its root. Every byte read through
``open_file`` is counted (``bytes_read``): watch mode reads only what was appended, and says how much it read.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from runs.attach.importers import ImportFault

_roots: list[Path] = []
_read = [0]
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a FIFO does not hang the open
FOLDER_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_DIRECTORY


def confine(roots: list[str | Path]) -> None:
    """From now on, ``open_file`` opens only files under ``roots`` (absolute, without links: settings resolves them)."""
    _roots[:] = [Path(r) for r in roots]


def bytes_read() -> int:
    return _read[0]


class _Counted(io.FileIO):
    """A file descriptor read with every byte counted."""

    def readinto(self, buffer) -> int | None:
        n = super().readinto(buffer)
        _read[0] += n or 0
        return n

    def read(self, size: int = -1) -> bytes | None:
        data = super().read(size)
        _read[0] += len(data or b"")
        return data

    def readall(self) -> bytes:
        data = super().readall()
        _read[0] += len(data)
        return data


def _root_of(path: Path) -> tuple[Path, tuple[str, ...]]:
    if not path.is_absolute():
        raise ImportFault(f"{path.name}: not an absolute path")
    for root in _roots or [path.parent]:
        if path.is_relative_to(root):
            parts = path.relative_to(root).parts
            if parts and ".." not in parts:
                return root, parts
    raise ImportFault(f"{path.name}: not under the import folders")


def open_file(path: str | Path) -> io.BufferedReader:
    """``path`` opened for reading without following a link at any component below its root, checked by what was
    opened; ImportFault names the file otherwise. The caller closes it."""
    path = Path(path)
    root, parts = _root_of(path)
    name = "/".join(parts[-2:])
    try:
        folder = os.open(root, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY)
    except OSError as exc:
        raise ImportFault(f"{name}: its import folder cannot be opened ({exc.strerror})") from None
    try:
        device = os.fstat(folder).st_dev
        for part in parts[:-1]:
            try:
                inner = os.open(part, FOLDER_FLAGS, dir_fd=folder)
            except OSError as exc:
                raise ImportFault(_refusal(name, exc, f"{part}/ is a link or not a folder")) from None
            os.close(folder)
            folder = inner
        try:
            fd = os.open(parts[-1], FILE_FLAGS, dir_fd=folder)
        except OSError as exc:
            raise ImportFault(_refusal(name, exc, "a link")) from None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ImportFault(f"{name}: not a regular file")
        if info.st_nlink != 1:
            raise ImportFault(f"{name}: a file with {info.st_nlink} names (a hard link): copy it to import it")
        if info.st_dev != device:
            raise ImportFault(f"{name}: on another file system than its import folder")
        os.set_blocking(fd, True)
        return io.BufferedReader(_Counted(fd, "rb", closefd=True), buffer_size=1024 * 1024)
    except BaseException:
        os.close(fd)
        raise


def _refusal(name: str, exc: OSError, link: str) -> str:
    import errno

    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return f"{name}: {link}: files under the import folders are read without following links"
    if exc.errno == errno.ENOENT:
        return f"{name}: no such file"
    return f"{name}: cannot be opened ({exc.strerror})"
