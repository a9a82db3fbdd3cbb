"""What the sandbox raises: SandboxError and its kinds; and WorkerLost, how the host's own code says that a worker
can no longer be trusted or reached (it costs the worker, and counts as a fault)."""

from __future__ import annotations


class SandboxError(Exception):
    """A call or start failed. ``kind`` is the user's exception type (``ZeroDivisionError``, ``SyntaxError``) or one of
    ours (``InvalidResult``, ``InvalidInput``, ``MissingFunction``, ``SourceTooLarge``, ``ProtocolError``,
    ``ResultTooLarge``, ``ScratchQuota``, ``Timeout``, ``Crash``, ``SandboxUnavailable``); ``line`` is the line in the
    user's source, or None; ``stdout`` what the function printed before it failed; ``duration_s`` how long a failed
    call took."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "SandboxError",
        line: int | None = None,
        stdout: str = "",
        traceback: str = "",
    ):
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


class WorkerLost(Exception):
    """The worker can no longer be trusted or reached; ``cls`` is the public error to raise."""

    def __init__(self, cls, kind: str, message: str):
        super().__init__(message)
        self.cls, self.kind, self.message = cls, kind, message


def malformed(message: str = "the worker sent a malformed reply") -> WorkerLost:
    return WorkerLost(SandboxCrash, "ProtocolError", message)
