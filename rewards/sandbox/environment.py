"""An environment (TRL's ``environment_factory``) in the sandbox: one worker, locked down as a reward function's is
(``docs/sandbox.md``), holds the instances of the user's class, one per rollout, by an id the host picks. The user's
code runs only there; the training program holds stand-ins (rewards.toolspec.stand_in_class) that forward here.

    with EnvironmentSandbox(source, "CalculatorSession", methods=["calculator"], slot=7) as env:
        env.reset(1, {"prompt": [...], "answer": "7"})      # None, or text for the last user message
        env.call(1, "calculator", {"expression": "3 + 4"})  # "7", as TRL shows a tool's result
        env.reward(1)                                       # get_reward()'s float
        env.drop(1)

Every call raises SandboxError kinds only, as ToolSandbox.invoke does: the user's exception (the worker and its
instances live on), ``ResultTooLarge``, ``InvalidInput``, ``InvalidResult``/``InvalidReward`` (reset or get_reward
returned the wrong type), ``Timeout`` and ``Crash`` (the worker is killed with every instance; the next call starts
a fresh worker, where a lost instance is ``LostInstance`` until its next reset makes it again).
"""

from __future__ import annotations

import msgpack

from rewards.sandbox.host import SandboxError
from rewards.sandbox.tool import MAX_ARGUMENT_BYTES, ToolSandbox


class EnvironmentSandbox(ToolSandbox):
    """The instances of one environment class in one sandboxed worker. See the module docstring."""

    MODE = "environment"

    def __init__(self, source: str, class_name: str, *, methods, **kwargs):
        super().__init__(source, class_name, **kwargs)
        self.methods = tuple(methods)

    def reset(self, instance: int, row: dict) -> str | None:
        return self._act("reset", instance, arguments=row)

    def call(self, instance: int, method: str, arguments: dict) -> str:
        if method not in self.methods:
            raise SandboxError(f"the environment has no tool {method!r}", kind="UnknownMethod")
        return self._act("call", instance, method=method, arguments=arguments)

    def reward(self, instance: int) -> float | None:
        return self._act("reward", instance)

    def drop(self, instance: int) -> None:
        self._act("drop", instance)

    def _act(self, action: str, instance: int, **fields):
        arguments = fields.get("arguments")
        if arguments is not None and (not isinstance(arguments, dict)
                                      or not all(isinstance(k, str) for k in arguments)):
            raise SandboxError("the arguments must be a JSON object", kind="InvalidInput")
        with self._lock:
            try:
                body = msgpack.packb({"op": "environment", "id": self._seq + 1, "action": action,
                                      "instance": int(instance), **fields}, use_bin_type=True)
            except (TypeError, ValueError, OverflowError) as exc:
                raise SandboxError(f"the arguments cannot be sent to the environment: {exc}",
                                   kind="InvalidInput") from None
            if len(body) > MAX_ARGUMENT_BYTES:
                raise SandboxError(f"the arguments are {len(body)} bytes; the limit is {MAX_ARGUMENT_BYTES}",
                                   kind="InvalidInput")
            self._seq += 1
            outcome = self._request(body, self.timeout_s, lambda reply: self._env_outcome(reply, action))
        if isinstance(outcome, SandboxError):
            self.failures += 1
            raise outcome
        return outcome

    def _env_outcome(self, reply, action: str):
        """The action's result, or the user's error; ValueError for anything an honest worker does not send."""
        if type(reply) is not dict or reply.get("id") != self._seq:
            raise ValueError("not a reply to this call")
        if reply.get("ok") is True and reply.keys() == {"id", "ok", "result"}:
            result = reply["result"]
            expected = {"call": (str,), "reset": (str, type(None)), "reward": (float, type(None)),
                        "drop": (type(None),)}[action]
            if type(result) not in expected or (type(result) is str and len(result) > self.result_chars):
                raise ValueError("a result of the wrong type or size")
            return result
        if reply.get("ok") is False and reply.keys() == {"id", "ok", "error"}:
            return self._user_error(reply["error"], "")
        raise ValueError("a malformed reply")


__all__ = ["EnvironmentSandbox", "SandboxError"]
