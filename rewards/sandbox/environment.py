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

from rewards.sandbox.host import SandboxError
from rewards.sandbox.replies import reward_problem
from rewards.sandbox.tool import ToolSandbox

# what each action's result may be
RESULT_TYPES = {"call": (str,), "reset": (str, type(None)), "reward": (float, type(None)), "drop": (type(None),)}


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
        """get_reward's number, checked here as a reward function's are (the worker's own check is not trusted)."""
        value = self._act("reward", instance)
        problem = None if value is None else reward_problem(value)
        if problem:
            raise SandboxError(f"get_reward returned {value}; {problem}", kind="InvalidReward")
        return value

    def drop(self, instance: int) -> None:
        self._act("drop", instance)

    def _act(self, action: str, instance: int, **fields):
        if fields.get("arguments") is not None:
            self._check_arguments(fields["arguments"])
        return self._ask(
            lambda seq: {"op": "environment", "id": seq, "action": action, "instance": int(instance), **fields},
            lambda reply: self._outcome(reply, RESULT_TYPES[action]),
        )


__all__ = ["EnvironmentSandbox", "SandboxError"]
