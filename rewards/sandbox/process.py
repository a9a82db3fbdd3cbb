"""One sandbox worker process as the host holds it (rewards.sandbox.host): its pipes, its CPU time read from /proc,
freezing it between calls and checking it stayed frozen, killing it; and what this kernel and process offer a
sandbox (``sandbox_support``). No Django."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

from rewards.sandbox import child as _child

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
FROZEN_CPU_S = 0.05  # CPU a frozen worker may show between calls: what ran after the snapshot, before SIGSTOP landed
SIGSTOP_BIT = 1 << (signal.SIGSTOP - 1)  # in /proc/<pid>/status ShdPnd / SigPnd


def env_bool(name: str) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name}={os.environ[name]!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def effective_caps() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return ~0 if os.geteuid() == 0 else 0


def sandbox_support() -> dict:
    """What this kernel and process offer: ``landlock_abi``, ``seccomp``, ``can_setuid`` (root with CAP_SETUID and
    CAP_SETGID), ``arch``; ``missing`` lists why user code would be refused (empty when ``ok``)."""
    abi, seccomp, arch = _child.landlock_abi(), _child.seccomp_available(), os.uname().machine
    caps = effective_caps()
    can_setuid = bool(caps & (1 << 7)) and bool(caps & (1 << 6))
    missing = []
    if arch != "x86_64":
        missing.append(f"the seccomp filter is written for x86_64, this machine is {arch}")
    if abi == 0:
        missing.append("Landlock is not available (Linux >= 5.13 with landlock in the lsm= list)")
    if not seccomp:
        missing.append("seccomp is not available")
    if not can_setuid and abi < 6:
        missing.append(
            f"this process cannot give the worker a uid of its own (not root) and Landlock ABI {abi} < 6 "
            "cannot keep it from signalling this process (Linux >= 6.12 needed)"
        )
    return {
        "arch": arch,
        "landlock_abi": abi,
        "seccomp": seccomp,
        "can_setuid": can_setuid,
        "missing": missing,
        "ok": not missing,
    }


class Worker:
    """One worker process, our ends of its two pipes, and its /proc stat file (its CPU time, as the kernel counts
    it). The worker has a session and process group of its own (``start_new_session``), with one process in it."""

    def __init__(self, proc: subprocess.Popen, wfd: int, rfd: int):
        self.proc, self.wfd, self.rfd = proc, wfd, rfd
        self.buf = bytearray()
        self.readable, self.writable = select.poll(), select.poll()
        self.readable.register(rfd, select.POLLIN)
        self.writable.register(wfd, select.POLLOUT)
        self.awake_s = 0.0  # wall time spent thawed, and CPU time seen between calls: an upper bound of its CPU time
        self.frozen_cpu_s: float | None = None  # its CPU time as it was frozen
        try:  # held open: a pid reused after the worker died reads as an error here, never as another process
            self.stat_fd = os.open(f"/proc/{proc.pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.stat_fd = -1

    def freeze(self) -> None:
        """SIGSTOP its process group: no user code (timers, signal handlers, SIGIO) runs until ``thaw``. User code
        could undo it (a POSIX timer whose signal is SIGCONT; seccomp denies the direct ways), so ``frozen_since``
        checks before the next request that it stayed stopped and used no CPU meanwhile."""
        self._signal(signal.SIGSTOP)
        self.frozen_cpu_s = self._stat()[1]

    def frozen_since(self) -> str | None:
        """None if the worker stayed frozen since ``freeze``, else what it did: not stopped (and no SIGSTOP still on
        its way), or CPU time used between calls (a worker that continued itself and stopped again). Whatever CPU
        it used meanwhile is charged to ``awake_s``. Nothing is checked where /proc cannot be read."""
        state, cpu = self._stat()
        if state is None or cpu is None or self.frozen_cpu_s is None:
            return None
        used, self.frozen_cpu_s = max(0.0, cpu - self.frozen_cpu_s), cpu
        self.awake_s += used
        if used > FROZEN_CPU_S:
            return f"it used {used:.2f} s of CPU time while frozen"
        deadline = time.perf_counter() + 0.05  # a SIGSTOP just taken but not yet acted on reads as running
        while state != "T" and not self._stop_pending():
            if time.perf_counter() > deadline:
                return f"it was not stopped (state {state}): something sent it SIGCONT"
            time.sleep(0.001)
            state = self._stat()[0]
        return None

    def _stat(self) -> tuple[str | None, float | None]:
        """Its state letter and user + system CPU seconds, from /proc/<pid>/stat; None, None where it is closed."""
        if self.stat_fd >= 0:
            try:
                data = os.pread(self.stat_fd, 1024, 0)
                fields = data[data.rindex(b")") + 2 :].split()
                # state, utime, stime: proc(5) fields 3, 14, 15
                return fields[0].decode("ascii"), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
            except (OSError, ValueError, IndexError, UnicodeDecodeError):
                pass
        return None, None

    def _stop_pending(self) -> bool:
        try:
            with open(f"/proc/{self.proc.pid}/status", "rb") as fh:  # not yet reaped: the pid is still its own
                pending = dict(line.split(b":", 1) for line in fh if line.startswith((b"ShdPnd", b"SigPnd")))
            return any(int(value, 16) & SIGSTOP_BIT for value in pending.values())
        except (OSError, ValueError):
            return False

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except OSError:  # already gone: the next read reports how it died
            pass

    def cpu_s(self) -> float:
        """User + system CPU seconds of the worker, from the kernel; the thawed wall time where /proc is closed."""
        cpu = self._stat()[1]
        return self.awake_s if cpu is None else cpu

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
        self.proc.wait()
        for fd in (self.wfd, self.rfd, self.stat_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.wfd = self.rfd = self.stat_fd = -1


def exit_text(rc: int) -> str:
    if rc < 0:
        if -rc == signal.SIGKILL:
            return "was killed by SIGKILL (its CPU-time limit, or it killed itself)"
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"
