"""The training program's reward functions: built-ins called in process, user code in the sandbox (one worker per
function, faults counted and a faulty function disabled). No Django here."""

from __future__ import annotations

import os
import time

from grpo_web_protocol.config import TrainConfig
from grpo_web_protocol.events import EventWriter

from rewards.builtins import BUILTINS
from rewards.sandbox import Sandbox, SandboxError
from rewards.sandbox.faults import FaultBudget


def reward_functions(config: TrainConfig, events: EventWriter | None = None) -> tuple[list, list[float], list]:
    """The run's reward functions, named so TRL logs them as ``rewards/<name>/mean``; plus what to close at the end."""
    funcs, closers = [], []
    for index, spec in enumerate(config.rewards):
        if spec.builtin:
            base = BUILTINS[spec.builtin]
        else:
            base = SandboxedReward(
                spec,
                slot=rank_slot(config.sandbox_slot_base, index, sandboxes_per_rank(config)),
                events=events,
                max_faults=config.max_reward_faults,
                allow_weak=config.allow_weak_sandbox,
            )
            closers.append(base)

        funcs.append(_named(base, spec.name))
    return funcs, [spec.weight for spec in config.rewards], closers


def sandboxes_per_rank(config: TrainConfig) -> int:
    """Sandboxes one training process starts: one per reward function, then one per tool, then the environment's."""
    return len(config.rewards) + len(config.tools) + (1 if config.environment else 0)


def rank_slot(base: int, index: int, functions: int) -> int:
    """The sandbox slot (and uid) of sandbox ``index`` (of ``functions`` per process: ``sandboxes_per_rank``) in this
    training process: each rank of a multi-GPU run (accelerate's LOCAL_RANK) gets a block of its own, so no two
    ranks' sandboxes share a uid or a scratch."""
    return base + int(os.environ.get("LOCAL_RANK", "0") or 0) * functions + index


def _named(base, name: str):
    """``base`` under the name TRL logs. A closure, not a default argument: every keyword (a dataset column named
    ``_base`` or ``self`` too) goes through to ``base``."""

    def func(completions, **kwargs):
        start = time.perf_counter()
        scores = base(completions, **kwargs)
        log_metric = kwargs.get("log_metric")  # TRL's: averaged per logged step, beside its own metrics
        if log_metric is not None and completions:
            log_metric(f"rewards/{name}/time_per_call_ms", (time.perf_counter() - start) * 1000)
            log_metric(f"rewards/{name}/none_frac", sum(s is None for s in scores) / len(completions))
        return scores

    func.__name__ = name
    return func


class SandboxedReward:
    """A user's reward function served by one persistent sandboxed worker for the whole run.

    TRL calls it like any reward function. A call that faults (an exception, a crash, a timeout, a malformed result)
    abstains for the batch (None for every completion) and is reported to the event log; after ``max_faults`` faults
    the function is disabled for the rest of the run. The training process never executes the user's code itself.
    """

    def __init__(self, spec, *, slot: int, events: EventWriter | None, max_faults: int, allow_weak: bool):
        self.spec, self.events = spec, events
        self.budget = FaultBudget(max_faults)
        self.sandbox = Sandbox(spec.source, spec.entrypoint, slot=slot, allow_weak=allow_weak)
        self.sandbox.start()
        if events and self.sandbox.isolation.get("weak"):  # weak mode: the run page says what was missing
            events.write("reward_sandbox", name=spec.name, weak=self.sandbox.isolation["weak"])

    def __call__(
        self,
        /,
        completions,
        prompts=None,
        completion_ids=None,
        trainer_state=None,
        log_extra=None,
        log_metric=None,
        environments=None,
        **columns,
    ):
        if self.budget.disabled:
            return [None] * len(completions)
        try:
            # TRL's log_extra / log_metric are replayed with what the user's code logged, after a successful call
            return self.sandbox.call(
                completions,
                prompts=prompts,
                completion_ids=completion_ids,
                trainer_state=trainer_state,
                log_extra=log_extra,
                log_metric=log_metric,
                **columns,
            ).rewards
        except SandboxError as exc:
            self.budget.spend()
            if self.events:
                self.events.write(
                    "reward_fault",
                    name=self.spec.name,
                    error=str(exc),
                    faults=self.budget.faults,
                    disabled=self.budget.disabled,
                    step=trainer_state.global_step + 1 if trainer_state else None,
                )
            return [None] * len(completions)

    def close(self):
        self.sandbox.close()
