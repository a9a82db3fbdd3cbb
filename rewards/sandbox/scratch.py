"""A worker's scratch directory, emptied and measured whatever user code left in it (any depth, links, modes 000),
never following a link; and the end of a Sandbox that was not closed (its finalizer)."""

from __future__ import annotations

import os
import stat


def reap(workers: list, scratch: str | None) -> None:
    """A Sandbox's finalizer: kill its worker (if any) and remove its scratch directory."""
    while workers:
        workers.pop().kill()
    if scratch:
        wipe(scratch, remove=True)


def wipe(path: str, remove: bool = False) -> bool:
    """Empty (or remove) a scratch directory, whatever user code left in it: any depth, links, modes 000. Iterative
    and relative to open directory descriptors, so it never follows a link, never leaves the directory's file
    system and holds two descriptors at most; it never raises. True when everything went."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            fd = os.open(path, flags)
        except PermissionError:  # ``path`` itself is ours, in a root only we may write to: not a planted link
            os.chmod(path, 0o700)
            fd = os.open(path, flags)
    except OSError:
        return not os.path.lexists(path)
    top = os.fstat(fd)
    names: list[str] = []  # the way down from ``path``
    ids = [(top.st_dev, top.st_ino)]  # (dev, inode) of each directory on the way, to check each step up
    stuck: set[tuple[int, int]] = set()  # directories that could not be emptied: skipped, not retried forever
    clean = True
    try:
        while True:
            descended = False
            try:
                os.chmod(fd, 0o700)  # a mode-000 directory of our own: we must list and unlink in it
            except OSError:
                pass
            try:
                with os.scandir(fd) as it:
                    entries = [entry.name for entry in it]
            except OSError:
                entries, clean = [], False
            for name in entries:
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):
                        os.unlink(name, dir_fd=fd)
                        continue
                    if (st.st_dev, st.st_ino) in stuck:
                        continue
                    try:
                        os.rmdir(name, dir_fd=fd)
                        continue
                    except OSError:
                        pass
                    if st.st_dev != top.st_dev:  # a mount point: not ours to empty
                        stuck.add((st.st_dev, st.st_ino))
                        clean = False
                        continue
                    try:
                        child = os.open(name, flags, dir_fd=fd)
                    except PermissionError:
                        os.chmod(name, 0o700, dir_fd=fd)  # checked to be a directory, not a link, just above
                        child = os.open(name, flags, dir_fd=fd)
                    cst = os.fstat(child)
                    if (cst.st_dev, cst.st_ino) != (st.st_dev, st.st_ino):  # swapped under us
                        os.close(child)
                        stuck.add((st.st_dev, st.st_ino))
                        clean = False
                        continue
                    os.close(fd)
                    fd = child
                    names.append(name)
                    ids.append((cst.st_dev, cst.st_ino))
                    descended = True
                    break
                except OSError:
                    clean = False
            if descended:
                continue
            if not names:
                break
            # This directory is as empty as it gets: go up one level and remove it.
            parent = os.open("..", flags, dir_fd=fd)
            pst = os.fstat(parent)
            os.close(fd)
            fd = parent
            name, done = names.pop(), ids.pop()
            if (pst.st_dev, pst.st_ino) != ids[-1]:
                return False  # moved while we walked: stop rather than touch anything else
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                stuck.add(done)
                clean = False
    except OSError:
        return False
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    if remove:
        try:
            os.rmdir(path)
        except OSError:
            return False
    return clean


def usage(path: str, max_entries: int) -> tuple[int, int]:
    """Bytes and entries under ``path``, counting stops past ``max_entries``; a folder it cannot read (or a path
    too long to name) counts as too many entries. Iterative; links are counted, never followed."""
    total, count, stack = 0, 0, [path]
    try:
        while stack and count <= max_entries:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    count += 1
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
    except OSError:
        count = max_entries + 1
    return total, count
