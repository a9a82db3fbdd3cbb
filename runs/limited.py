"""A child process under limits: how a user's files are read (runs.datasets.isolated for datasets,
runs.attach.importers.isolated for a run's files), never in the web process or a worker itself.

The child gets limits on its address space and CPU time, no core dumps, a wall-clock timeout, only the parent's
harmless environment (no DATABASE_URL, SECRET_KEY, REDIS_URL), and dies with the process that started it. The
caller learns how it ended: its exit status, or the signal that ended it, and the tail of what it wrote to stderr.
No Django here."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout: the child imports the project from it
PR_SET_PDEATHSIG = 1  # prctl(2)
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# The limit is on address space, and what is reserved counts as much as what is used: Arrow's default allocator
# (mimalloc) reserves a gigabyte at its first table and tens of megabytes for each thread that touches it, and glibc
# 64 MB for each thread's arena. A child reading parquet under load (more of Arrow's I/O threads alive at once) ran
# past 4 GB holding a few megabytes of data, and glibc aborted it (SIGABRT: "cannot allocate memory for
# thread-local data"). With the system allocator, two arenas and few threads, it reserves what it uses.
LEAN_ENV = {
    "ARROW_DEFAULT_MEMORY_POOL": "system",
    "MALLOC_ARENA_MAX": "2",
    "ARROW_IO_THREADS": "2",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 * 1024**3  # address space of the child
    cpu_seconds: int = 1800
    wall_seconds: int = 3600

    def said(self) -> str:
        return f"{self.memory_bytes // 1024**2} MB of memory and {self.cpu_seconds} s of CPU"


class WallTimeout(Exception):
    """The child ran past its wall-clock limit and was killed."""


@dataclass
class Ended:
    signal: int | None  # the signal that ended the child (a crash, a limit), else None
    stderr_tail: str  # the last line it wrote to stderr, or "no output"

    def signal_name(self) -> str:
        try:
            return signal.Signals(self.signal).name
        except ValueError:
            return str(self.signal)

    def out_of_memory(self) -> bool:
        return out_of_memory(self.stderr_tail)


def out_of_memory(message: str) -> bool:
    """Whether a child's error is the memory limit speaking (Python's, C++'s, or the loader's for a shared object)."""
    return any(
        sign in message
        for sign in (
            "MemoryError",
            "bad_alloc",
            "failed to map segment",
            "Cannot allocate memory",
            "cannot allocate",  # glibc, for a thread's own data
            "Failed to launch worker thread",  # Arrow, when a thread's stack does not fit
            "Memory allocation still failed",  # OpenBLAS
        )
    )


def _limit(limits: Limits) -> None:
    """In the child, before it runs anything: its limits, no core dumps, and its end with the process that started
    it (a worker killed at its task's time limit takes its child along)."""
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def run_limited(
    module: str,
    job_path: Path,
    *,
    limits: Limits,
    cwd: Path,
    passed_env: tuple[str, ...] = (),
    every_second: Callable[[], None] | None = None,
) -> Ended:
    """``python -m module job_path`` in a child under ``limits``, in ``cwd``, with PASSED_ENV and ``passed_env`` of
    this process's environment; ``every_second`` is called while it runs. WallTimeout past the wall-clock limit."""
    env = {k: os.environ[k] for k in PASSED_ENV + passed_env if k in os.environ}
    env.update(LEAN_ENV)
    env["PYTHONPATH"] = str(ROOT)  # the child's own folder may be an empty one
    with tempfile.TemporaryFile(dir=job_path.parent) as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(job_path)],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=lambda: _limit(limits),
        )
        deadline = time.monotonic() + limits.wall_seconds
        try:
            while True:
                try:  # a second at a time, and never past the deadline
                    proc.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline:
                        raise WallTimeout(limits.wall_seconds) from None
                    if every_second is not None:
                        every_second()
        finally:
            if proc.returncode is None:  # past the limit, or interrupted (the task's own time limit)
                proc.kill()
                proc.wait()
        stderr.seek(0)
        tail = stderr.read()[-65536:].decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
    return Ended(signal=-proc.returncode if proc.returncode < 0 else None, stderr_tail=tail[0])


def exit_now(code: int) -> None:
    """End the child once its answer is written, without running C++ static destructors: at interpreter exit Arrow's
    thread pools could be torn down while a thread of theirs was still joinable, and the child died on SIGABRT
    ("terminate called without an active exception", about 1 in 90 reads on a loaded machine) after a good answer."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
