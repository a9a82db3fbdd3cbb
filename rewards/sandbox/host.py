"""The host side of the reward sandbox: starts, feeds, times and checks one worker process per reward function.

No Django: the training process imports this. The worker (``child.py``) is untrusted once user code has run in it,
so everything that protects this process is enforced here or by the kernel: the wall-clock limit (SIGKILL), the
worker's CPU time (read from /proc, not from its replies), freezing it between calls (SIGSTOP), the message size
cap, a bound on how many objects a reply may decode into, the caps on printed text and log records, and a strict
check of the shape of every reply. Whatever bytes arrive, ``start()`` and ``call()`` raise only SandboxError kinds,
and every reply that an honest worker could not have sent costs the worker and counts as a fault.

The Sandbox class is here; the checks of what a worker sends are in ``replies.py``, the worker process as held here
and ``sandbox_support`` in ``process.py``, its scratch directory's cleanup in ``scratch.py``, the errors in
``errors.py`` (all importable from here, as before).
"""

from __future__ import annotations

import fcntl
import math
import os
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import msgpack

from rewards import step_scores
from rewards.sandbox import child as _child
from rewards.sandbox.errors import (
    SandboxCrash,
    SandboxError,
    SandboxTimeout,
    SandboxUnavailable,
    WorkerLost,
    malformed,
)
from rewards.sandbox.process import Worker, env_bool, exit_text, sandbox_support
from rewards.sandbox.replies import (
    CALL_REPLY_ITEMS,
    HOST_KINDS,
    MAX_LOG_CHARS,
    MAX_LOG_NAME_CHARS,
    MAX_LOG_NAMES,
    MAX_LOG_VALUES,
    MAX_REPLY_ITEMS,
    MAX_RUN_LOG_NAMES,
    CallResult,
    call_reply,
    decode,
    isolation_report,
    load_error,
    run_log_names,
)
from rewards.sandbox.scratch import reap, usage, wipe

CHILD_SCRIPT = str(Path(_child.__file__).resolve())
HEADER = struct.Struct(">I")
# slot N runs as uid/gid UID_BASE + N when the host may switch uids; GRPO_SANDBOX_UID_BASE moves the range, for two
# installations on one host (RLIMIT_NPROC counts every process of a uid, so they must not share uids)
UID_BASE = int(os.environ.get("GRPO_SANDBOX_UID_BASE", "61000"))
MAX_SLOT = 3999
MAX_SOURCE_BYTES = 1 << 20
STATE_FIELDS = ("global_step", "max_steps", "epoch", "num_train_epochs")
F_SETPIPE_SZ = 1031
# Pipe buffers are kernel memory, outside the worker's RLIMIT_AS: each pipe only as large as its traffic needs.
REQUEST_PIPE_SIZE = 256 << 10  # a 64 x 2 KB batch in one write
REPLY_PIPE_SIZE = 64 << 10  # a reply is mostly rewards; a larger one takes a few reads
NOFILE = 64


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

    def __init__(
        self,
        source: str,
        func_name: str,
        *,
        slot: int = 0,
        timeout_s: float = 5.0,
        memory_mb: int = 1024,
        cpu_limit_s: float = 600.0,
        scratch_mb: int = 64,
        scratch_root: str | os.PathLike | None = None,
        max_message_mb: int = 64,
        stdout_limit: int = 64 * 1024,
        startup_timeout_s: float = 30.0,
        private_mounts: bool | None = None,
        allow_weak: bool = False,
        log_names: int = MAX_LOG_NAMES,
        run_log_names: int = MAX_RUN_LOG_NAMES,
    ):
        if not isinstance(source, str):
            raise TypeError("source must be a str")
        size = len(source.encode("utf-8", "surrogatepass"))
        if size > MAX_SOURCE_BYTES:
            raise SandboxError(
                f"the source is {size} bytes; the limit is {MAX_SOURCE_BYTES} bytes", kind="SourceTooLarge"
            )
        if not func_name.isidentifier():
            raise ValueError(f"{func_name!r} is not a Python function name")
        if not (isinstance(slot, int) and 0 <= slot <= MAX_SLOT):
            raise ValueError(f"slot must be an int in 0..{MAX_SLOT}")
        self.source, self.func_name, self.slot = source, func_name, slot
        self.timeout_s, self.startup_timeout_s = float(timeout_s), float(startup_timeout_s)
        self.memory_mb, self.cpu_limit_s, self.scratch_mb = int(memory_mb), float(cpu_limit_s), int(scratch_mb)
        self.max_message = int(max_message_mb) << 20
        self.stdout_limit, self.private_mounts = int(stdout_limit), private_mounts
        # distinct log_extra columns and log_metric names (each): per call, and over this Sandbox's life (a run's)
        self.log_names, self.run_log_names = int(log_names), int(run_log_names)
        self.logged_columns: set[str] = set()
        self.logged_metrics: set[str] = set()
        self._reply_items = MAX_REPLY_ITEMS  # what the next reply may decode into (a call's: its rewards and logs)
        self._reply_bytes: int | None = None  # what the next reply may announce, when less than max_message
        self.allow_weak = bool(allow_weak) or env_bool("GRPO_SANDBOX_ALLOW_WEAK")
        self.scratch_root = Path(scratch_root or Path(tempfile.gettempdir()) / f"grpo-sandbox-{os.geteuid()}")
        self.calls = 0  # calls made, whatever their outcome
        self.failures = 0  # calls that raised: user exceptions, invalid results, timeouts, crashes
        self.faults = 0  # workers lost: timeouts, crashes, protocol violations, deaths between calls
        self.start_time_s: float | None = None  # how long the last (re)start took
        self.isolation: dict = {}  # what the worker applied: uid, landlock, seccomp, private_mounts, weak
        self.scratch: str | None = None
        self._workers: list[Worker] = []  # zero or one; a list so the finalizer sees respawns
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
                    "refusing to run reward code: "
                    + "; ".join(support["missing"])
                    + ". Set GRPO_SANDBOX_ALLOW_WEAK=1 (or allow_weak=True) to run it with weaker isolation.",
                    kind="SandboxUnavailable",
                )
            if self.scratch is None:
                self.scratch = tempfile.mkdtemp(prefix=f"slot{self.slot}-", dir=self._scratch_root())
                self._finalizer = weakref.finalize(self, reap, self._workers, self.scratch)
            else:
                wipe(self.scratch)
            uid = UID_BASE + self.slot if support["can_setuid"] else None
            began = time.perf_counter()
            worker = self._spawn()
            self._workers.append(worker)
            config = {
                "source": self.source,
                "name": self.func_name,
                "uid": uid,
                "gid": uid,
                "scratch": self.scratch,
                "scratch_mb": self.scratch_mb,
                "memory_mb": self.memory_mb,
                "cpu_s": max(1, math.ceil(self.cpu_limit_s)),
                "nofile": NOFILE,
                "stdout_limit": self.stdout_limit,
                "max_message": self.max_message,
                "log_values": MAX_LOG_VALUES,
                "log_chars": MAX_LOG_CHARS,
                "log_names": self.log_names,
                "log_name_chars": MAX_LOG_NAME_CHARS,
                "step_column": step_scores.COLUMN,
                "step_scores": step_scores.MAX_STEP_SCORES,
                "step_split_chars": step_scores.MAX_SPLIT_CHARS,
                "mode": self.MODE,
                "result_chars": self.result_chars,
                "methods": list(self.methods),
                "nproc": self.NPROC,
                "parallel": self.parallel,
                "allow_weak": self.allow_weak,
                "private_mounts": self.private_mounts,
                "ppid": os.getpid(),
            }
            deadline = began + self.startup_timeout_s
            try:
                try:
                    self._send(worker, msgpack.packb(config, use_bin_type=True), deadline)
                    # First what the worker applied: it sends that before any user code has run in it.
                    isolation = isolation_report(
                        self._receive(worker, deadline),
                        allow_weak=self.allow_weak,
                        observe=lambda: self._observe(worker.proc.pid),
                    )
                    # Then whether the source loaded: user code has run by now, only kinds and texts are taken.
                    error = load_error(self._receive(worker, deadline), stdout_limit=self.stdout_limit)
                except (WorkerLost, SandboxError):
                    raise
                except Exception as exc:  # whatever arrived: a ProtocolError, never another exception
                    raise malformed(f"the worker sent an unreadable start message ({type(exc).__name__})") from None
            except WorkerLost as lost:
                raise self._lose(lost, "the worker did not start: ") from None
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
            raise SandboxUnavailable(
                f"{root} is not a directory owned by uid {os.geteuid()}; pass another scratch_root",
                kind="SandboxUnavailable",
            )
        os.chmod(root, 0o711)
        return root

    def _discard(self) -> None:
        while self._workers:
            self._workers.pop().kill()

    def _fault(self) -> None:
        """The worker is lost (dead, timed out, or no longer trusted): count it, and kill it; the next request starts
        a fresh one."""
        self.faults += 1
        self._discard()

    def _lose(self, lost: WorkerLost, prefix: str = "") -> SandboxError:
        """The fault ``lost`` tells of, counted; the public error to raise for it."""
        self._fault()
        return lost.cls(prefix + lost.message, kind=lost.kind)

    def _spawn(self) -> Worker:
        req_r, req_w = os.pipe2(os.O_CLOEXEC)
        rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        for fd, size in ((req_w, REQUEST_PIPE_SIZE), (rep_r, REPLY_PIPE_SIZE)):
            try:
                fcntl.fcntl(fd, F_SETPIPE_SZ, size)
            except OSError:
                pass
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": self.scratch,
            "TMPDIR": self.scratch,
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-X", "utf8", CHILD_SCRIPT, str(req_r), str(rep_w)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(req_r, rep_w),
                cwd="/",
                env=env,
                start_new_session=True,
            )
        except BaseException:
            for fd in (req_w, rep_r):
                os.close(fd)
            raise
        finally:
            os.close(req_r)
            os.close(rep_w)
        os.set_blocking(req_w, False)
        return Worker(proc, req_w, rep_r)

    # --- calls ------------------------------------------------------------------------------------------------

    def call(
        self,
        /,
        completions,
        prompts=None,
        completion_ids=None,
        trainer_state=None,
        log_extra=None,
        log_metric=None,
        **columns,
    ) -> CallResult:
        """Score ``completions`` with TRL's calling convention; dataset columns come as keyword arguments (any
        name but TRL's own: a column may be called ``self``). ``trainer_state`` may be TRL's TrainerState or a
        dict; when ``log_extra`` / ``log_metric`` are given (TRL passes its own), what the function logged is
        replayed into them after a successful call.
        Raises SandboxError (user exception, invalid result), SandboxTimeout or SandboxCrash, and nothing else."""
        with self._lock:
            completions = list(completions)
            request = {
                "op": "call",
                "id": self._seq + 1,
                "args": {
                    "completions": completions,
                    "prompts": prompts,
                    "completion_ids": completion_ids,
                    "trainer_state": self._state(trainer_state),
                    "columns": columns,
                },
            }
            body = self._pack(request)
            self._seq += 1
            self._reply_items = len(completions) + CALL_REPLY_ITEMS
            try:
                result, duration = self._request(
                    body,
                    self.timeout_s,
                    check_scratch=True,
                    parse=lambda reply: self._call_result(reply, len(completions)),
                )
            finally:
                self._reply_items = MAX_REPLY_ITEMS
            result.duration_s = duration
            result.replay(log_extra, log_metric)
            return result

    def _between_calls(self) -> WorkerLost | None:
        """What the worker did between calls that costs it: it died, sent bytes nobody asked for, or ran while it
        was frozen. The request that finds it fails with that fault, so a function that dies or runs between calls
        spends its fault budget like one that fails in a call (a silent respawn would let it do so for ever)."""
        if not self._workers:
            return None
        worker = self._workers[0]
        rc = worker.proc.poll()
        if rc is not None:
            return WorkerLost(
                SandboxCrash,
                "Crash",
                f"between calls, the worker running {self.func_name} {exit_text(rc)}; a fresh one starts on the "
                "next call",
            )
        if worker.buf or worker.readable.poll(0):
            return malformed(f"the worker running {self.func_name} sent bytes nobody asked for, after its reply")
        ran = worker.frozen_since()
        if ran is not None:
            return WorkerLost(
                SandboxCrash,
                "Crash",
                f"the worker running {self.func_name} ran between calls, when it was frozen ({ran}); it was killed "
                "and a fresh one starts on the next call",
            )
        return None

    def _call_result(self, reply, n: int) -> CallResult | SandboxError:
        """The reply to the reward call just sent (for ``n`` completions), within the caps on log names per call and
        for the run."""
        result = call_reply(reply, n, seq=self._seq, stdout_limit=self.stdout_limit, max_names=self.log_names)
        if isinstance(result, SandboxError):
            return result
        return run_log_names(
            result, self.logged_columns, self.logged_metrics, limit=self.run_log_names, func_name=self.func_name
        )

    def _ready(self) -> Worker:
        """The worker for the next request: a fresh one where the last died or sent bytes nobody asked for (a
        fault), or none was running."""
        if self._workers and not self._idle(self._workers[0]):
            self._fault()
        self.start()
        return self._workers[0]

    @staticmethod
    def _idle(worker: Worker) -> bool:
        """Alive, and nothing arrived since its last reply (no EOF either)."""
        return worker.proc.poll() is None and not worker.buf and not worker.readable.poll(0)

    def _request(self, body: bytes, limit_s: float, parse, *, check_scratch: bool = False):
        """Send ``body`` (its id already counted in ``_seq``) and return ``parse(reply)`` and the seconds the
        exchange took, within ``limit_s``. Every request counts in ``calls``; one that fails, in ``failures``; one
        that costs the worker, in ``faults`` too (so does one that finds its worker lost between calls, before
        anything is sent: ``_between_calls``). Whatever goes wrong is raised as a SandboxError kind, with its
        ``duration_s``: the exchange's failure, an error ``parse`` raises or returns (the user's: the worker lives
        on), or a ProtocolError for a reply ``parse`` rejects with any other exception (it costs the worker).
        ``check_scratch``: enforce the scratch quota after the request (reward calls); else only recycle."""
        with self._lock:
            lost = self._between_calls()
            if lost is not None:
                self.calls += 1
                self.failures += 1
                error = self._lose(lost)
                error.duration_s = 0.0
                raise error from None
            worker = self._ready()
            began = time.perf_counter()
            try:
                try:
                    result = parse(self._round_trip(worker, body, began, began + limit_s))
                except (WorkerLost, SandboxError):
                    raise
                except ValueError as exc:  # a parser's words for what it rejected
                    raise malformed(f"the worker sent a malformed reply ({exc})"[:500]) from None
                except Exception as exc:  # whatever arrived: a ProtocolError, never another exception
                    raise malformed(f"the worker sent an unreadable reply ({type(exc).__name__})") from None
            except WorkerLost as lost:
                self.failures += 1
                error = self._lose(lost)
                error.duration_s = time.perf_counter() - began
                raise error from None
            except SandboxError as error:
                self.failures += 1
                error.duration_s = time.perf_counter() - began
                raise
            finally:
                self.calls += 1
            duration = time.perf_counter() - began
            if check_scratch:
                self._after_call(worker)
            else:
                self._recycle(worker)
            if isinstance(result, SandboxError):
                self.failures += 1
                result.duration_s = duration
                raise result
            return result, duration

    def _round_trip(self, worker: Worker, body: bytes, began: float, deadline: float):
        """Thaw the worker, send ``body``, decode its reply, freeze it again."""
        worker.thaw()
        try:
            self._send(worker, body, deadline)
            return self._receive(worker, deadline)
        finally:
            worker.freeze()
            worker.awake_s += time.perf_counter() - began

    def _recycle(self, worker: Worker) -> bool:
        """Replace a worker past half its CPU budget (as the kernel counts it), between calls. One thread (seccomp
        denies clone), frozen between calls: its CPU time is at most the time it was thawed plus what ``frozen_since``
        saw and charged, so /proc is read only once that could pass half the budget; without seccomp, after every
        call."""
        if (
            worker.awake_s > self.cpu_limit_s / 2 or not self.isolation.get("seccomp")
        ) and worker.cpu_s() > self.cpu_limit_s / 2:
            self._discard()
            return True
        return False

    def _after_call(self, worker: Worker) -> None:
        """Recycle a worker past half its CPU budget; enforce the scratch quota where the kernel could not."""
        if self._recycle(worker):
            return
        if not self.isolation.get("private_mounts") and self.scratch:
            limit = self.scratch_mb << 20
            used, entries = usage(self.scratch, 4096)
            if used > limit or entries > 4096:
                self.failures += 1
                self._fault()
                wipe(self.scratch)
                raise SandboxError(
                    f"the function left {used} bytes in {entries} entries in its scratch directory; "
                    f"the limit is {limit} bytes and 4096 entries. The directory was emptied.",
                    kind="ScratchQuota",
                )

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
                    raise SandboxError(
                        f"column {name!r} cannot be sent to the sandbox: {col_exc}", kind="InvalidInput"
                    ) from None
            raise SandboxError(
                f"the call's arguments cannot be sent to the sandbox: {exc}", kind="InvalidInput"
            ) from None
        if len(body) > self.max_message:
            raise SandboxError(
                f"the call's arguments are {len(body)} bytes; the limit is {self.max_message}", kind="InvalidInput"
            )
        return body

    # --- the pipe protocol ------------------------------------------------------------------------------------

    def _send(self, worker: Worker, body: bytes, deadline: float) -> None:
        head, data = HEADER.pack(len(body)), memoryview(body)
        while head or data:
            try:
                if head:  # header and body in one writev: no copy of the body to put them together
                    sent = os.writev(worker.wfd, [head, data]) - len(head)
                    head = b"" if sent >= 0 else head[len(head) + sent :]
                    data = data[max(sent, 0) :]
                else:
                    data = data[os.write(worker.wfd, data) :]
            except BlockingIOError:
                if not worker.writable.poll(self._wait_ms(deadline)):
                    raise self._timeout() from None
            except (BrokenPipeError, OSError):
                raise self._died(worker) from None

    def _receive(self, worker: Worker, deadline: float):
        self._fill(worker, HEADER.size, deadline)
        (n,) = HEADER.unpack_from(worker.buf)
        most = self.max_message if self._reply_bytes is None else min(self._reply_bytes, self.max_message)
        if n > most:  # refused before its body is read
            raise malformed(f"the worker announced a reply of {n} bytes; the limit is {most} bytes")
        self._fill(worker, HEADER.size + n, deadline)
        body = bytes(worker.buf[HEADER.size : HEADER.size + n])
        del worker.buf[: HEADER.size + n]
        return decode(body, self._reply_items)

    def _fill(self, worker: Worker, need: int, deadline: float) -> None:
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

    def _timeout(self) -> WorkerLost:
        return WorkerLost(
            SandboxTimeout,
            "Timeout",
            f"{self.func_name} did not finish within its time limit; its worker was killed and a fresh one "
            "starts on the next call",
        )

    def _died(self, worker: Worker) -> WorkerLost:
        try:
            rc = worker.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            worker.kill()
            rc = worker.proc.returncode
        return WorkerLost(
            SandboxCrash,
            "Crash",
            f"the worker running {self.func_name} {exit_text(rc)}; a fresh one starts on the next call",
        )


__all__ = [
    "HOST_KINDS",
    "CallResult",
    "Sandbox",
    "SandboxCrash",
    "SandboxError",
    "SandboxTimeout",
    "SandboxUnavailable",
    "sandbox_support",
]
