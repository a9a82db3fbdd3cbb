"""The host side of the reward sandbox: starts, feeds, times and checks one worker process per reward function.

No Django: the training process imports this. The worker (``child.py``) is untrusted once user code has run in it,
so everything that protects this process is enforced here or by the kernel: the wall-clock limit (SIGKILL), the
worker's CPU time (read from /proc, not from its replies), freezing it between calls (SIGSTOP), the message size
cap, a bound on how many objects a reply may decode into, the caps on printed text and log records, and a strict
check of the shape of every reply. Whatever bytes arrive, ``start()`` and ``call()`` raise only SandboxError kinds,
and every reply that an honest worker could not have sent costs the worker and counts as a fault.
"""

from __future__ import annotations

import fcntl
import math
import os
import select
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import msgpack

from rewards.sandbox import child as _child

CHILD_SCRIPT = str(Path(_child.__file__).resolve())
HEADER = struct.Struct(">I")
UID_BASE = 61000  # slot N runs as uid/gid UID_BASE + N when the host may switch uids
MAX_SLOT = 3999
MAX_SOURCE_BYTES = 1 << 20
MAX_REPLY_ITEMS = 2_000_000  # lists + dict pairs one reply may decode into: a 64 MiB reply must not become 4 GB
MAX_LOG_VALUES = 100_000  # log_extra values plus log_metric records one call may return
MAX_LOG_CHARS = 8 << 20  # characters of log_extra strings and of column / metric names one call may return
MAX_ERROR_MESSAGE, MAX_ERROR_TRACEBACK, MAX_KIND = 4000, 8000, 200
# Kinds only this side raises: one arriving from the worker is the user's own exception class of that name.
HOST_KINDS = frozenset({"SandboxError", "SandboxUnavailable", "Timeout", "Crash", "ProtocolError", "ScratchQuota",
                        "InvalidInput", "SourceTooLarge"})
CALL_REPLY_KEYS = frozenset({"id", "ok", "stdout", "truncated", "rewards", "extra", "metrics", "error"})
ISOLATION_TYPES = {"uid": (int,), "landlock": (str, type(None)), "landlock_abi": (int,), "seccomp": (bool,),
                   "private_mounts": (bool,), "private_mounts_error": (str,), "weak": (list,)}
NO_PRIVATE_ROOT = "no private mount root: the worker sees the host's file system (through Landlock)"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STATE_FIELDS = ("global_step", "max_steps", "epoch", "num_train_epochs")
F_SETPIPE_SZ = 1031
PIPE_SIZE = 1 << 20
NOFILE = 64


class SandboxError(Exception):
    """A call or start failed. ``kind`` is the user's exception type (``ZeroDivisionError``, ``SyntaxError``) or one of
    ours (``InvalidResult``, ``InvalidInput``, ``MissingFunction``, ``SourceTooLarge``, ``ProtocolError``,
    ``ResultTooLarge``, ``ScratchQuota``, ``Timeout``, ``Crash``, ``SandboxUnavailable``); ``line`` is the line in the
    user's source, or None; ``stdout`` what the function printed before it failed; ``duration_s`` how long a failed
    call took."""

    def __init__(self, message: str, *, kind: str = "SandboxError", line: int | None = None, stdout: str = "",
                 traceback: str = ""):
        self.kind, self.message, self.line, self.stdout, self.traceback = kind, message, line, stdout, traceback
        self.duration_s: float | None = None  # set for failed calls: how long the call took
        where = f" at line {line}" if line is not None else ""
        super().__init__(f"{kind}{where}: {message}")


class SandboxTimeout(SandboxError):
    """The call ran past ``timeout_s``; the worker was killed (a fresh one starts on the next call)."""


class SandboxCrash(SandboxError):
    """The worker died during the call (segfault, os._exit, a signal, a limit, a bad reply)."""


class SandboxUnavailable(SandboxError):
    """This kernel or process cannot isolate user code as required, and weak mode was not allowed."""


@dataclass
class CallResult:
    rewards: list[float | None]
    stdout: str
    stdout_truncated: bool
    duration_s: float
    logged_extra: dict[str, list] = field(default_factory=dict)
    logged_metrics: dict[str, list[float]] = field(default_factory=dict)

    def replay(self, log_extra=None, log_metric=None) -> None:
        """Send what the function logged to TRL's ``log_extra(column, values)`` / ``log_metric(name, value)``."""
        for column, values in self.logged_extra.items():
            if log_extra is not None:
                log_extra(column, values)
        for name, values in self.logged_metrics.items():
            for value in values if log_metric is not None else ():
                log_metric(name, value)


def _env_bool(name: str) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name}={os.environ[name]!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def _effective_caps() -> int:
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
    caps = _effective_caps()
    can_setuid = bool(caps & (1 << 7)) and bool(caps & (1 << 6))
    missing = []
    if arch != "x86_64":
        missing.append(f"the seccomp filter is written for x86_64, this machine is {arch}")
    if abi == 0:
        missing.append("Landlock is not available (Linux >= 5.13 with landlock in the lsm= list)")
    if not seccomp:
        missing.append("seccomp is not available")
    if not can_setuid and abi < 6:
        missing.append(f"this process cannot give the worker a uid of its own (not root) and Landlock ABI {abi} < 6 "
                       "cannot keep it from signalling this process (Linux >= 6.12 needed)")
    return {"arch": arch, "landlock_abi": abi, "seccomp": seccomp, "can_setuid": can_setuid, "missing": missing,
            "ok": not missing}


class _Lost(Exception):
    """The worker can no longer be trusted or reached; ``cls`` is the public error to raise."""

    def __init__(self, cls, kind: str, message: str):
        super().__init__(message)
        self.cls, self.kind, self.message = cls, kind, message


def _malformed(message: str = "the worker sent a malformed reply") -> _Lost:
    return _Lost(SandboxCrash, "ProtocolError", message)


class _Worker:
    """One worker process, our ends of its two pipes, and its /proc stat file (its CPU time, as the kernel counts
    it). The worker has a session and process group of its own (``start_new_session``), with one process in it."""

    def __init__(self, proc: subprocess.Popen, wfd: int, rfd: int):
        self.proc, self.wfd, self.rfd = proc, wfd, rfd
        self.buf = bytearray()
        self.readable, self.writable = select.poll(), select.poll()
        self.readable.register(rfd, select.POLLIN)
        self.writable.register(wfd, select.POLLOUT)
        self.awake_s = 0.0  # wall time spent thawed: an upper bound of its CPU time (one thread, frozen between)
        try:  # held open: a pid reused after the worker died reads as an error here, never as another process
            self.stat_fd = os.open(f"/proc/{proc.pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.stat_fd = -1

    def freeze(self) -> None:
        """SIGSTOP its process group: no user code (timers, signal handlers, SIGIO) runs until ``thaw``."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except OSError:  # already gone: the next read reports how it died
            pass

    def cpu_s(self) -> float:
        """User + system CPU seconds of the worker, from the kernel; the thawed wall time where /proc is closed."""
        if self.stat_fd >= 0:
            try:
                data = os.pread(self.stat_fd, 1024, 0)
                fields = data[data.rindex(b")") + 2:].split()
                return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (proc(5) fields 14, 15)
            except (OSError, ValueError, IndexError):
                pass
        return self.awake_s

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


def _reap(workers: list, scratch: str | None) -> None:
    while workers:
        workers.pop().kill()
    if scratch:
        _wipe(scratch, remove=True)


def _wipe(path: str, remove: bool = False) -> bool:
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


def _usage(path: str, max_entries: int) -> tuple[int, int]:
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


def _exit_text(rc: int) -> str:
    if rc < 0:
        if -rc == signal.SIGKILL:
            return "was killed by SIGKILL (its CPU-time limit, or it killed itself)"
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


def _plain(obj):
    """msgpack fallback for numpy/torch values in dataset columns."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot send a {type(obj).__name__} to the sandbox")


class Sandbox:
    """One reward function in its own sandboxed worker process. See the package docstring."""

    MODE, NPROC = "reward", 1  # what the worker serves, and its RLIMIT_NPROC (rewards/sandbox/code.py differs)
    result_chars = 0  # a tool's result may be this long (rewards/sandbox/tool.py); rewards return numbers
    methods: tuple[str, ...] = ()  # an environment's tool methods (rewards/sandbox/environment.py)
    parallel = 1  # test processes at a time, for CodeRunner's template

    def __init__(self, source: str, func_name: str, *, slot: int = 0, timeout_s: float = 5.0, memory_mb: int = 1024,
                 cpu_limit_s: float = 600.0, scratch_mb: int = 64, scratch_root: str | os.PathLike | None = None,
                 max_message_mb: int = 64, stdout_limit: int = 64 * 1024, startup_timeout_s: float = 30.0,
                 private_mounts: bool | None = None, allow_weak: bool = False):
        if not isinstance(source, str):
            raise TypeError("source must be a str")
        size = len(source.encode("utf-8", "surrogatepass"))
        if size > MAX_SOURCE_BYTES:
            raise SandboxError(f"the source is {size} bytes; the limit is {MAX_SOURCE_BYTES} bytes",
                               kind="SourceTooLarge")
        if not func_name.isidentifier():
            raise ValueError(f"{func_name!r} is not a Python function name")
        if not (isinstance(slot, int) and 0 <= slot <= MAX_SLOT):
            raise ValueError(f"slot must be an int in 0..{MAX_SLOT}")
        self.source, self.func_name, self.slot = source, func_name, slot
        self.timeout_s, self.startup_timeout_s = float(timeout_s), float(startup_timeout_s)
        self.memory_mb, self.cpu_limit_s, self.scratch_mb = int(memory_mb), float(cpu_limit_s), int(scratch_mb)
        self.max_message = int(max_message_mb) << 20
        self.stdout_limit, self.private_mounts = int(stdout_limit), private_mounts
        self.allow_weak = bool(allow_weak) or _env_bool("GRPO_SANDBOX_ALLOW_WEAK")
        self.scratch_root = Path(scratch_root or Path(tempfile.gettempdir()) / f"grpo-sandbox-{os.geteuid()}")
        self.calls = 0  # calls made, whatever their outcome
        self.failures = 0  # calls that raised: user exceptions, invalid results, timeouts, crashes
        self.faults = 0  # workers lost: timeouts, crashes, protocol violations, deaths between calls
        self.start_time_s: float | None = None  # how long the last (re)start took
        self.isolation: dict = {}  # what the worker applied: uid, landlock, seccomp, private_mounts, weak
        self.scratch: str | None = None
        self._workers: list[_Worker] = []  # zero or one; a list so the finalizer sees respawns
        self._seq = 0
        self._lock = threading.RLock()
        self._finalizer = None

    # --- lifecycle --------------------------------------------------------------------------------------------

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return bool(self._workers) and self._workers[0].proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The worker's process id, while one is running."""
        return self._workers[0].proc.pid if self.running else None

    def start(self) -> None:
        """Start the worker if it is not running. Raises SandboxUnavailable (fail closed) or SandboxError (the
        source does not compile, raises at import, or defines no function ``func_name``)."""
        with self._lock:
            if self.running:
                return
            self._discard()
            support = sandbox_support()
            if support["missing"] and not self.allow_weak:
                raise SandboxUnavailable(
                    "refusing to run reward code: " + "; ".join(support["missing"])
                    + ". Set GRPO_SANDBOX_ALLOW_WEAK=1 (or allow_weak=True) to run it with weaker isolation.",
                    kind="SandboxUnavailable")
            if self.scratch is None:
                self.scratch = tempfile.mkdtemp(prefix=f"slot{self.slot}-", dir=self._scratch_root())
                self._finalizer = weakref.finalize(self, _reap, self._workers, self.scratch)
            else:
                _wipe(self.scratch)
            uid = UID_BASE + self.slot if support["can_setuid"] else None
            began = time.perf_counter()
            worker = self._spawn()
            self._workers.append(worker)
            config = {"source": self.source, "name": self.func_name, "uid": uid, "gid": uid,
                      "scratch": self.scratch, "scratch_mb": self.scratch_mb, "memory_mb": self.memory_mb,
                      "cpu_s": max(1, math.ceil(self.cpu_limit_s)), "nofile": NOFILE,
                      "stdout_limit": self.stdout_limit, "max_message": self.max_message,
                      "log_values": MAX_LOG_VALUES, "log_chars": MAX_LOG_CHARS, "mode": self.MODE,
                      "result_chars": self.result_chars, "methods": list(self.methods),
                      "nproc": self.NPROC, "parallel": self.parallel,
                      "allow_weak": self.allow_weak, "private_mounts": self.private_mounts, "ppid": os.getpid()}
            deadline = began + self.startup_timeout_s
            try:
                try:
                    self._send(worker, msgpack.packb(config, use_bin_type=True), deadline)
                    # First what the worker applied: it sends that before any user code has run in it.
                    isolation = self._isolation(self._receive(worker, deadline), worker)
                    # Then whether the source loaded: user code has run by now, only kinds and texts are taken.
                    error = self._loaded(self._receive(worker, deadline))
                except (_Lost, SandboxError):
                    raise
                except Exception as exc:  # whatever arrived: a ProtocolError, never another exception
                    raise _malformed(f"the worker sent an unreadable start message ({type(exc).__name__})") from None
            except _Lost as lost:
                self.faults += 1
                self._discard()
                raise lost.cls(f"the worker did not start: {lost.message}", kind=lost.kind) from None
            except SandboxError:
                self._discard()
                raise
            if error is not None:
                self._discard()
                raise error
            worker.freeze()
            worker.awake_s = time.perf_counter() - began
            self.isolation = isolation
            self.start_time_s = time.perf_counter() - began

    def _isolation(self, message, worker: _Worker) -> dict:
        """The worker's report of its isolation, checked against what the kernel shows of it; refuses a worker
        without a private mount root unless weak mode is allowed."""
        if type(message) is not dict:
            raise _malformed()
        if message.get("unavailable") is True and message.keys() == {"ok", "unavailable", "error"}:
            _, text, _, tb = self._error_fields(message["error"])  # sent before any user code ran: its own words
            advice = " Set GRPO_SANDBOX_ALLOW_WEAK=1 (or allow_weak=True) to run it with weaker isolation." \
                if "PermissionError" in text and not self.allow_weak else ""
            raise SandboxUnavailable(f"refusing to run reward code: {text}.{advice}", kind="SandboxUnavailable",
                                     traceback=tb)
        report = message.get("isolation")
        if message.keys() != {"locked", "isolation"} or message["locked"] is not True or type(report) is not dict \
                or report.keys() - ISOLATION_TYPES.keys() or not ISOLATION_TYPES.keys() - {"private_mounts_error"} \
                <= report.keys() or any(type(report[key]) not in ISOLATION_TYPES[key] for key in report) \
                or len(report["weak"]) > 20 or any(type(w) is not str or len(w) > 1000 for w in report["weak"]) \
                or len(report.get("private_mounts_error", "")) > 1000 or len(report["landlock"] or "") > 100:
            raise _malformed("the worker sent a malformed isolation report")
        for key, seen in self._observe(worker.proc.pid).items():
            if seen is not None and report[key] != seen:
                raise _malformed(f"the worker reported {key}={report[key]!r}; the kernel shows {seen!r}")
        weak = list(report["weak"])
        if not report["private_mounts"]:
            if not self.allow_weak:
                raise SandboxUnavailable(
                    f"refusing to run reward code: no private mount root could be made "
                    f"({report.get('private_mounts_error') or 'private mounts are off'}). Allow user namespaces or "
                    "give the worker CAP_SYS_ADMIN (docs/sandbox.md), or set GRPO_SANDBOX_ALLOW_WEAK=1 to run it "
                    "with the host's file system in view.", kind="SandboxUnavailable")
            if not any(w.startswith("no private mount root") for w in weak):
                weak.append(NO_PRIVATE_ROOT)
        return {**report, "weak": weak}

    @staticmethod
    def _observe(pid: int) -> dict:
        """The worker's effective uid, whether a seccomp filter is on, and whether its mount namespace differs from
        ours, as the kernel shows them; None where /proc does not tell."""
        seen: dict = {"uid": None, "seccomp": None, "private_mounts": None}
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    if key == "Uid":
                        seen["uid"] = int(value.split()[1])
                    elif key == "Seccomp":
                        seen["seccomp"] = value.strip() == "2"  # SECCOMP_MODE_FILTER
        except (OSError, ValueError, IndexError):
            pass
        try:
            seen["private_mounts"] = os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        except OSError:
            pass
        return seen

    def _loaded(self, message) -> SandboxError | None:
        """None when the source loaded; else its error (SyntaxError, an import error, MissingFunction...)."""
        if type(message) is not dict:
            raise _malformed()
        stdout = message.get("stdout", "")
        if type(stdout) is not str or len(stdout) > self.stdout_limit:
            raise _malformed("the worker sent a malformed start message")
        if message.get("ok") is True and message.keys() <= {"ok", "stdout"}:
            return None
        if message.get("ok") is False and message.keys() <= {"ok", "stdout", "error"}:
            return self._user_error(message.get("error"), stdout)
        raise _malformed("the worker sent a malformed start message")

    def close(self) -> None:
        """Kill the worker and remove its scratch directory. The object can be started again."""
        with self._lock:
            self._discard()
            if self._finalizer is not None:
                self._finalizer()
                self._finalizer, self.scratch = None, None

    def _scratch_root(self) -> Path:
        """The parent of scratch directories: ours alone (not a planted link), and traversable by sandbox uids."""
        root = self.scratch_root
        root.mkdir(mode=0o711, parents=True, exist_ok=True)
        st = os.lstat(root)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise SandboxUnavailable(f"{root} is not a directory owned by uid {os.geteuid()}; pass another "
                                     "scratch_root", kind="SandboxUnavailable")
        os.chmod(root, 0o711)
        return root

    def _discard(self) -> None:
        while self._workers:
            self._workers.pop().kill()

    def _spawn(self) -> _Worker:
        req_r, req_w = os.pipe2(os.O_CLOEXEC)
        rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        for fd in (req_w, rep_r):
            try:
                fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)  # a 64 x 2 KB batch in one write
            except OSError:
                pass
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": self.scratch,
               "TMPDIR": self.scratch, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-X", "utf8", CHILD_SCRIPT, str(req_r), str(rep_w)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(req_r, rep_w), cwd="/", env=env, start_new_session=True)
        except BaseException:
            for fd in (req_w, rep_r):
                os.close(fd)
            raise
        finally:
            os.close(req_r)
            os.close(rep_w)
        os.set_blocking(req_w, False)
        return _Worker(proc, req_w, rep_r)

    # --- calls ------------------------------------------------------------------------------------------------

    def call(self, /, completions, prompts=None, completion_ids=None, trainer_state=None, log_extra=None,
             log_metric=None, **columns) -> CallResult:
        """Score ``completions`` with TRL's calling convention; dataset columns come as keyword arguments (any
        name but TRL's own: a column may be called ``self``). ``trainer_state`` may be TRL's TrainerState or a
        dict; when ``log_extra`` / ``log_metric`` are given (TRL passes its own), what the function logged is
        replayed into them after a successful call.
        Raises SandboxError (user exception, invalid result), SandboxTimeout or SandboxCrash, and nothing else."""
        with self._lock:
            completions = list(completions)
            request = {"op": "call", "id": self._seq + 1, "args": {
                "completions": completions, "prompts": prompts, "completion_ids": completion_ids,
                "trainer_state": self._state(trainer_state), "columns": columns}}
            body = self._pack(request)
            self._seq += 1
            worker = self._ready()
            began = time.perf_counter()
            try:
                try:
                    reply = self._round_trip(worker, body, began, began + self.timeout_s)
                    result = self._reply(reply, len(completions))
                except (_Lost, SandboxError):
                    raise
                except Exception as exc:  # whatever arrived: a ProtocolError, never another exception
                    raise _malformed(f"the worker sent an unreadable reply ({type(exc).__name__})") from None
            except _Lost as lost:
                self.failures += 1
                self.faults += 1
                self._discard()
                error = lost.cls(lost.message, kind=lost.kind)
                error.duration_s = time.perf_counter() - began
                raise error from None
            except SandboxError as error:
                self.failures += 1
                error.duration_s = time.perf_counter() - began
                raise
            finally:
                self.calls += 1
            duration = time.perf_counter() - began
            self._after_call(worker)
            if isinstance(result, SandboxError):
                self.failures += 1
                result.duration_s = duration
                raise result
            result.duration_s = duration
            result.replay(log_extra, log_metric)
            return result

    def _ready(self) -> _Worker:
        """The worker for the next request: a fresh one where the last died or sent bytes nobody asked for (a
        fault), or none was running."""
        if self._workers and not self._idle(self._workers[0]):
            self.faults += 1
            self._discard()
        self.start()
        return self._workers[0]

    @staticmethod
    def _idle(worker: _Worker) -> bool:
        """Alive, and nothing arrived since its last reply (no EOF either)."""
        return worker.proc.poll() is None and not worker.buf and not worker.readable.poll(0)

    def _request(self, body: bytes, limit_s: float, parse):
        """Send ``body`` (its id already counted in ``_seq``) and return ``parse(reply)``, within ``limit_s``.
        Whatever goes wrong, in the exchange or in ``parse``, is a SandboxError kind; a reply ``parse`` rejects
        (any exception) is a ProtocolError that costs the worker, as a fault."""
        with self._lock:
            worker = self._ready()
            began = time.perf_counter()
            try:
                try:
                    result = parse(self._round_trip(worker, body, began, began + limit_s))
                except _Lost:
                    raise
                except Exception as exc:
                    raise _malformed(f"the worker sent a malformed reply ({exc})"[:500]) from None
            except _Lost as lost:
                self.failures += 1
                self.faults += 1
                self._discard()
                raise lost.cls(lost.message, kind=lost.kind) from None
            finally:
                self.calls += 1
            self._recycle(worker)
            return result

    def _round_trip(self, worker: _Worker, body: bytes, began: float, deadline: float):
        """Thaw the worker, send ``body``, decode its reply, freeze it again."""
        worker.thaw()
        try:
            self._send(worker, body, deadline)
            return self._receive(worker, deadline)
        finally:
            worker.freeze()
            worker.awake_s += time.perf_counter() - began

    def _recycle(self, worker: _Worker) -> bool:
        """Replace a worker past half its CPU budget (as the kernel counts it), between calls. One thread (seccomp
        denies clone), frozen between calls: its CPU time is at most the time it was thawed, so /proc is read only
        once that could pass half the budget; without seccomp, after every call."""
        if (worker.awake_s > self.cpu_limit_s / 2 or not self.isolation.get("seccomp")) \
                and worker.cpu_s() > self.cpu_limit_s / 2:
            self._discard()
            return True
        return False

    def _after_call(self, worker: _Worker) -> None:
        """Recycle a worker past half its CPU budget; enforce the scratch quota where the kernel could not."""
        if self._recycle(worker):
            return
        if not self.isolation.get("private_mounts") and self.scratch:
            limit = self.scratch_mb << 20
            used, entries = _usage(self.scratch, 4096)
            if used > limit or entries > 4096:
                self.failures += 1
                self.faults += 1
                self._discard()
                _wipe(self.scratch)
                raise SandboxError(f"the function left {used} bytes in {entries} entries in its scratch directory; "
                                   f"the limit is {limit} bytes and 4096 entries. The directory was emptied.",
                                   kind="ScratchQuota")

    @staticmethod
    def _state(state) -> dict:
        if state is None:
            return {name: 0 for name in STATE_FIELDS}
        get = state.get if isinstance(state, dict) else (lambda name, default: getattr(state, name, default))
        out = {}
        for name in STATE_FIELDS:
            value = get(name, 0)
            out[name] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
        return out

    def _pack(self, request: dict) -> bytes:
        try:
            body = msgpack.packb(request, use_bin_type=True, default=_plain)
        except (TypeError, ValueError, OverflowError) as exc:
            for name, value in request["args"]["columns"].items():
                try:
                    msgpack.packb(value, use_bin_type=True, default=_plain)
                except (TypeError, ValueError, OverflowError) as col_exc:
                    raise SandboxError(f"column {name!r} cannot be sent to the sandbox: {col_exc}",
                                       kind="InvalidInput") from None
            raise SandboxError(f"the call's arguments cannot be sent to the sandbox: {exc}", kind="InvalidInput") \
                from None
        if len(body) > self.max_message:
            raise SandboxError(f"the call's arguments are {len(body)} bytes; the limit is {self.max_message}",
                               kind="InvalidInput")
        return body

    def _reply(self, reply, n: int) -> CallResult | SandboxError:
        """A call's reply as a result, or the user's error; _Lost for anything an honest worker does not send."""
        if type(reply) is not dict or not reply.keys() <= CALL_REPLY_KEYS:
            raise _malformed()
        if type(reply.get("id")) is not int or reply["id"] != self._seq:
            raise _malformed("the worker answered out of turn")
        stdout, truncated = reply.get("stdout"), reply.get("truncated")
        if type(stdout) is not str or type(truncated) is not bool:
            raise _malformed()
        if len(stdout) > self.stdout_limit:
            raise _malformed(f"the worker sent {len(stdout)} characters of output; the limit is {self.stdout_limit}")
        if reply.get("ok") is True and "error" not in reply:
            rewards = self._rewards(reply.get("rewards"), n, stdout)
            return CallResult(rewards, stdout, truncated, 0.0,
                              *self._logs(reply.get("extra", []), reply.get("metrics", [])))
        if reply.get("ok") is False and not reply.keys() & {"rewards", "extra", "metrics"}:
            return self._user_error(reply.get("error"), stdout)
        raise _malformed()

    @staticmethod
    def _rewards(values, n: int, stdout: str) -> list[float | None]:
        """Exactly ``n`` finite numbers or None; bools count as 0.0/1.0 (TRL's tensor conversion does the same).
        The worker converts and checks the function's result first, so only NaN and inf get here honestly."""
        if type(values) is not list or len(values) != n:
            raise _malformed("the worker sent rewards of the wrong type or length")
        out: list[float | None] = []
        for i, v in enumerate(values):
            t = type(v)
            if v is None:
                out.append(None)
            elif t is float or t is int or t is bool:
                f = float(v)  # msgpack ints fit in 64 bits
                if not math.isfinite(f):
                    raise SandboxError(f"rewards[{i}] is {f}; rewards must be finite numbers or None",
                                       kind="InvalidResult", stdout=stdout)
                out.append(f)
            else:
                raise _malformed(f"the worker sent a {t.__name__} as rewards[{i}]")
        return out

    @staticmethod
    def _logs(extra, metrics) -> tuple[dict, dict]:
        """What log_extra / log_metric recorded, within MAX_LOG_VALUES values and MAX_LOG_CHARS characters."""
        if type(extra) is not list or type(metrics) is not list:
            raise _malformed("the worker sent malformed log records")
        values = chars = 0
        out_extra: dict[str, list] = {}
        out_metrics: dict[str, list[float]] = {}
        for record in extra:
            if type(record) is not list or len(record) != 2 or type(record[0]) is not str \
                    or type(record[1]) is not list:
                raise _malformed("the worker sent malformed log records")
            column, items = record
            values += len(items)
            chars += len(column)
            if values > MAX_LOG_VALUES:
                raise _malformed(f"the worker sent more than {MAX_LOG_VALUES} logged values")
            for v in items:
                t = type(v)
                if t is str:
                    chars += len(v)
                elif not (v is None or t is bool or t is int or t is float):
                    raise _malformed("the worker sent malformed log records")
            if chars > MAX_LOG_CHARS:
                raise _malformed(f"the worker sent more than {MAX_LOG_CHARS} characters of log records")
            out_extra.setdefault(column, []).extend(items)
        for record in metrics:
            if type(record) is not list or len(record) != 2 or type(record[0]) is not str \
                    or type(record[1]) not in (int, float):
                raise _malformed("the worker sent malformed metric records")
            name, value = record
            values += 1
            chars += len(name)
            if values > MAX_LOG_VALUES or chars > MAX_LOG_CHARS:
                raise _malformed(f"the worker sent more than {MAX_LOG_VALUES} log records or {MAX_LOG_CHARS} "
                                 "characters of them")
            out_metrics.setdefault(name, []).append(float(value))
        return out_extra, out_metrics

    @staticmethod
    def _error_fields(err) -> tuple[str, str, int | None, str]:
        """kind, message, line, traceback of an error the worker described; nothing else is taken."""
        if type(err) is not dict or not err.keys() <= {"kind", "message", "line", "traceback"}:
            raise _malformed("the worker sent a malformed error")
        kind, message, line, tb = err.get("kind"), err.get("message", ""), err.get("line"), err.get("traceback", "")
        if type(kind) is not str or not 0 < len(kind) <= MAX_KIND or type(message) is not str \
                or len(message) > MAX_ERROR_MESSAGE or type(tb) is not str or len(tb) > MAX_ERROR_TRACEBACK \
                or not (line is None or type(line) is int):
            raise _malformed("the worker sent a malformed error")
        return kind, message, line, tb

    @classmethod
    def _user_error(cls, err, stdout: str) -> SandboxError:
        """The user's error as the worker described it: a kind, a message, a line, a traceback, nothing more."""
        kind, message, line, tb = cls._error_fields(err)
        if kind in HOST_KINDS:  # the user's own exception class, not this side speaking
            kind, message = "UserException", f"the function raised an exception named {kind}: {message}"
        return SandboxError(message, kind=kind, line=line, stdout=stdout, traceback=tb)

    # --- the pipe protocol ------------------------------------------------------------------------------------

    def _send(self, worker: _Worker, body: bytes, deadline: float) -> None:
        head, data = HEADER.pack(len(body)), memoryview(body)
        while head or data:
            try:
                if head:  # header and body in one writev: no copy of the body to put them together
                    sent = os.writev(worker.wfd, [head, data]) - len(head)
                    head = b"" if sent >= 0 else head[len(head) + sent:]
                    data = data[max(sent, 0):]
                else:
                    data = data[os.write(worker.wfd, data):]
            except BlockingIOError:
                if not worker.writable.poll(self._wait_ms(deadline)):
                    raise self._timeout() from None
            except (BrokenPipeError, OSError):
                raise self._died(worker) from None

    def _receive(self, worker: _Worker, deadline: float):
        self._fill(worker, HEADER.size, deadline)
        (n,) = HEADER.unpack_from(worker.buf)
        if n > self.max_message:
            raise _malformed(f"the worker announced a reply of {n} bytes; the limit is {self.max_message} bytes")
        self._fill(worker, HEADER.size + n, deadline)
        body = bytes(worker.buf[HEADER.size:HEADER.size + n])
        del worker.buf[:HEADER.size + n]
        budget = [MAX_REPLY_ITEMS]

        def count(items):
            budget[0] -= len(items)
            if budget[0] < 0:
                raise ValueError("too many items")
            return items

        try:  # the C decoder nests at most 1024 deep (StackError) and recurses nowhere in this process
            return msgpack.unpackb(body, raw=False, strict_map_key=False, list_hook=count,
                                   object_pairs_hook=lambda pairs: dict(count(pairs)), max_ext_len=0,
                                   max_array_len=MAX_REPLY_ITEMS, max_map_len=MAX_REPLY_ITEMS)
        except Exception as exc:
            raise _malformed(f"the worker sent an unreadable reply ({type(exc).__name__})") from None

    def _fill(self, worker: _Worker, need: int, deadline: float) -> None:
        while len(worker.buf) < need:
            if not worker.readable.poll(self._wait_ms(deadline)):
                raise self._timeout()
            chunk = os.read(worker.rfd, max(need - len(worker.buf), 1 << 16))
            if not chunk:
                raise self._died(worker)
            worker.buf += chunk

    @staticmethod
    def _wait_ms(deadline: float) -> int:
        return max(0, math.ceil((deadline - time.perf_counter()) * 1000))

    def _timeout(self) -> _Lost:
        return _Lost(SandboxTimeout, "Timeout",
                     f"{self.func_name} did not finish within its time limit; its worker was killed and a fresh one "
                     "starts on the next call")

    def _died(self, worker: _Worker) -> _Lost:
        try:
            rc = worker.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            worker.kill()
            rc = worker.proc.returncode
        return _Lost(SandboxCrash, "Crash", f"the worker running {self.func_name} {_exit_text(rc)}; a fresh one "
                                            "starts on the next call")
