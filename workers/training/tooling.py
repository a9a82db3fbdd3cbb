"""The training program's tools (TRL's ``tools``): for each, a stand-in function with the tool's name, type hints
and docstring (read from its source, never run here: rewards.toolspec) whose body calls the tool in its own sandboxed
worker. No Django here.

TRL calls a tool with the arguments the model wrote and shows the model ``str(result)``; a tool that raises is shown
``{"error": str(exception)}`` and counted in ``tools/failure_frequency``. A sandbox failure (the user's exception, a
result too large, a timeout, a crash) is raised as such an exception, with the sandbox's message. A tool whose worker
is lost ``max_tool_faults`` times (timeouts, crashes) is disabled: every later call fails at once, saying so.
"""

from __future__ import annotations

from grpo_web_protocol.config import TrainConfig
from grpo_web_protocol.events import EventWriter

from rewards.library import source as library_source
from rewards.sandbox import SandboxCrash, SandboxError, SandboxTimeout
from rewards.sandbox.environment import EnvironmentSandbox
from rewards.sandbox.faults import FaultBudget
from rewards.sandbox.tool import ToolSandbox
from rewards.toolspec import environment_signature, stand_in, stand_in_class, tool_signature
from workers.training.rewarding import rank_slot, sandboxes_per_rank


class ToolFailed(Exception):
    """What TRL shows the model as the tool's error: the sandbox's message."""


def tool_functions(config: TrainConfig, events: EventWriter | None = None) -> tuple[list, list]:
    """The run's tools as TRL takes them, and what to close at the end. Slots follow the reward functions'."""
    funcs, closers = [], []
    for index, spec in enumerate(config.tools):
        code = library_source(spec.builtin) if spec.builtin else spec.source
        signature = tool_signature(code, spec.entrypoint)
        tool = SandboxedTool(
            spec.name,
            code,
            spec.entrypoint,
            events=events,
            max_faults=config.max_tool_faults,
            slot=rank_slot(config.sandbox_slot_base, len(config.rewards) + index, sandboxes_per_rank(config)),
            allow_weak=config.allow_weak_sandbox,
        )
        closers.append(tool)
        funcs.append(stand_in(signature, tool))
    return funcs, closers


def guarded_call(budget: FaultBudget, disabled: str, call):
    """``call()``, a tool call in a sandbox, as TRL shows its outcome: its result, or ToolFailed with the sandbox's
    message. A lost worker (timeout, crash) spends the budget; once it is spent every call fails at once."""
    if budget.disabled:
        raise ToolFailed(f"{disabled} for this run after {budget.faults} faults")
    try:
        return call()
    except (SandboxTimeout, SandboxCrash) as exc:
        budget.spend()
        raise ToolFailed(str(exc)) from None
    except SandboxError as exc:
        raise ToolFailed(str(exc)) from None


class SandboxedTool:
    """One tool served by one persistent sandboxed worker for the whole run; called with the model's arguments."""

    def __init__(
        self,
        name: str,
        code: str,
        entrypoint: str,
        *,
        slot: int,
        events: EventWriter | None,
        max_faults: int,
        allow_weak: bool,
    ):
        self.name, self.events = name, events
        self.budget = FaultBudget(max_faults)
        self.sandbox = ToolSandbox(code, entrypoint, slot=slot, allow_weak=allow_weak)
        self.sandbox.start()
        if events and self.sandbox.isolation.get("weak"):
            events.write("reward_sandbox", name=name, weak=self.sandbox.isolation["weak"])

    def __call__(self, arguments: dict) -> str:
        return guarded_call(self.budget, f"the tool {self.name} is disabled", lambda: self.sandbox.invoke(arguments))

    def close(self):
        self.sandbox.close()


class EnvironmentFailed(Exception):
    """An environment's reset or get_reward failed in the sandbox: the run stops with this message."""


def environment_factory(config: TrainConfig, events: EventWriter | None = None) -> tuple[type, list]:
    """The run's environment as TRL's ``environment_factory`` takes it (a class built from the user's, read without
    running it, whose instances forward to instances of the user's class in one sandboxed worker), and what to
    close at the end. Its slot follows the tools'."""
    spec = config.environment
    code = library_source(spec.builtin) if spec.builtin else spec.source
    signature = environment_signature(code, spec.entrypoint)
    backend = SandboxedEnvironment(
        spec.name,
        code,
        signature,
        events=events,
        max_faults=config.max_tool_faults,
        slot=rank_slot(config.sandbox_slot_base, len(config.rewards) + len(config.tools), sandboxes_per_rank(config)),
        allow_weak=config.allow_weak_sandbox,
    )
    return stand_in_class(signature, backend), [backend]


class SandboxedEnvironment:
    """The instances of one environment class, in one persistent sandboxed worker for the whole run. A tool call
    that fails is shown to the model (ToolFailed, as a tool's); a failing reset or get_reward stops the run with the
    sandbox's message (EnvironmentFailed): TRL cannot start or score a rollout without them."""

    def __init__(
        self,
        name: str,
        code: str,
        signature,
        *,
        slot: int,
        events: EventWriter | None,
        max_faults: int,
        allow_weak: bool,
    ):
        self.name, self.class_name, self.instances = name, signature.name, 0
        self.budget = FaultBudget(max_faults)
        self.sandbox = EnvironmentSandbox(
            code, signature.name, methods=[m.name for m in signature.methods], slot=slot, allow_weak=allow_weak
        )
        self.sandbox.start()
        if events and self.sandbox.isolation.get("weak"):
            events.write("reward_sandbox", name=name, weak=self.sandbox.isolation["weak"])

    def new(self) -> int:
        self.instances += 1
        return self.instances

    def reset(self, instance: int, row: dict):
        return self._lifecycle("reset", lambda: self.sandbox.reset(instance, row))

    def reward(self, instance: int):
        return self._lifecycle("get_reward", lambda: self.sandbox.reward(instance))

    def _lifecycle(self, what: str, act):
        try:
            return act()
        except SandboxError as exc:
            raise EnvironmentFailed(
                f"the environment {self.name} ({self.class_name}.{what}): {exc.kind}: {exc}"
            ) from None

    def call(self, instance: int, method: str, arguments: dict) -> str:
        return guarded_call(
            self.budget,
            f"the environment {self.name}'s tools are disabled",
            lambda: self.sandbox.call(instance, method, arguments),
        )

    def close(self):
        self.sandbox.close()
