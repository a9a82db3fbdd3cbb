"""A tool (TRL's ``tools``) in the sandbox: the user's function, called with the arguments the model wrote, in a
worker locked down exactly as a reward function's is (``docs/sandbox.md``).

    with ToolSandbox(source, "calculator", slot=7, timeout_s=5.0) as tool:
        tool.invoke({"expression": "3 + 4"})        # "7": str(result), as TRL shows a tool's result to the model

``invoke`` raises SandboxError kinds only, with a message fit to show the model (TRL puts ``str(exception)`` in the
tool message and counts the call as a failure): the user's exception (``ValueError: ...``, the worker lives on),
``ResultTooLarge`` (a result past ``result_chars``), ``InvalidInput`` (arguments that cannot be sent),
``Timeout`` and ``Crash`` (the worker is killed; the next call starts a fresh one).
"""

from __future__ import annotations

import msgpack

from rewards.sandbox.host import Sandbox, SandboxError
from rewards.sandbox.replies import MAX_REPLY_ITEMS, TOOL_REPLY_ITEMS, tool_reply_bytes, user_error
from rewards.toolspec import MAX_TOOL_RESULT_CHARS

MAX_ARGUMENT_BYTES = 1 << 20


class ToolSandbox(Sandbox):
    """One tool function in its own sandboxed worker. See the module docstring."""

    MODE = "tool"

    def __init__(self, source: str, func_name: str, *, result_chars: int = MAX_TOOL_RESULT_CHARS, **kwargs):
        super().__init__(source, func_name, **kwargs)
        self.result_chars = int(result_chars)

    def invoke(self, arguments: dict) -> str:
        self._check_arguments(arguments)
        return self._ask(lambda seq: {"op": "tool", "id": seq, "arguments": arguments}, self._outcome)

    @staticmethod
    def _check_arguments(arguments) -> None:
        if not isinstance(arguments, dict) or not all(isinstance(k, str) for k in arguments):
            raise SandboxError("the arguments must be a JSON object", kind="InvalidInput")

    def _ask(self, message, parse):
        """Send ``message(id)`` as the next request and return ``parse(reply)``; SandboxError kinds only (the books
        are kept by Sandbox._request)."""
        with self._lock:
            try:
                body = msgpack.packb(message(self._seq + 1), use_bin_type=True)
            except (TypeError, ValueError, OverflowError) as exc:
                raise SandboxError(
                    f"the arguments cannot be sent to the {self.MODE}: {exc}", kind="InvalidInput"
                ) from None
            if len(body) > MAX_ARGUMENT_BYTES:
                raise SandboxError(
                    f"the arguments are {len(body)} bytes; the limit is {MAX_ARGUMENT_BYTES}", kind="InvalidInput"
                )
            self._seq += 1
            # an honest reply is one text or one error: bounded in bytes and objects before it is read
            self._reply_items, self._reply_bytes = TOOL_REPLY_ITEMS, tool_reply_bytes(self.result_chars)
            try:
                return self._request(body, self.timeout_s, parse)[0]
            finally:
                self._reply_items, self._reply_bytes = MAX_REPLY_ITEMS, None

    def _outcome(self, reply, types: tuple[type, ...] = (str,)):
        """The result (one of ``types``; text within ``result_chars``), or the user's error; ValueError for anything
        an honest worker does not send."""
        if type(reply) is not dict or reply.get("id") != self._seq:
            raise ValueError("not a reply to this call")
        if reply.get("ok") is True and reply.keys() == {"id", "ok", "result"}:
            result = reply["result"]
            if type(result) not in types or (type(result) is str and len(result) > self.result_chars):
                raise ValueError("a result of the wrong type or size")
            return result
        if reply.get("ok") is False and reply.keys() == {"id", "ok", "error"}:
            return user_error(reply["error"], "")
        raise ValueError("a malformed reply")


__all__ = ["ToolSandbox", "SandboxError"]
