"""Environments (TRL's environment_factory): the class is read without running it (its tools' signatures, reset,
get_reward), and in the sandbox one worker holds an instance per rollout; a hostile or broken environment's reset,
method or get_reward comes back as a clear error within the time limit. No database."""

from __future__ import annotations

import re
import time

import pytest
from grpo_web_protocol.config import RewardSpec, ToolSpec, TrainConfig

from rewards.library import ENVIRONMENTS, source
from rewards.sandbox import sandbox_support
from rewards.sandbox.environment import EnvironmentSandbox
from rewards.toolspec import ToolError, environment_signature

SUPPORT = sandbox_support()
needs_sandbox = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")

ENV = '''
import os


class Counter:
    def __init__(self):
        self.total = 0

    def reset(self, **row):
        if row.get("mode") == "raise":
            raise ValueError("no start for " + str(row.get("who")))
        if row.get("mode") == "loop":
            while True:
                pass
        if row.get("mode") == "number":
            return 3
        self.total = int(row.get("start", 0))
        return "Start at " + str(self.total) if row.get("say") else None

    def add(self, n: int) -> str:
        """Add n to the total.

        Args:
            n: How much to add.
        """
        if n == 13:
            raise KeyError("unlucky")
        if n == 99:
            os._exit(4)
        self.total += n
        return str(self.total)

    def _secret(self):
        return "never a tool"

    def get_reward(self) -> float:
        if self.total == 7:
            raise RuntimeError("seven")
        if self.total == 8:
            return "eight"
        return float(self.total)
'''


def test_the_class_is_read_without_running_it():
    signature = environment_signature(ENV, "Counter")
    assert [m.name for m in signature.methods] == ["add"] and signature.has_reward
    assert [(p.name, p.type, p.required) for p in signature.methods[0].params] == [("n", "int", True)]
    library = environment_signature(source("calculator_session"), ENVIRONMENTS["calculator_session"])
    assert [m.name for m in library.methods] == ["calculator"] and library.has_reward


@pytest.mark.parametrize(
    "code, message",
    [
        ("class Other:\n    pass\n", "no top-level class named 'Counter'"),
        (
            "class Counter:\n    def add(self, n: int):\n        '''A.\n\n        Args:\n            n: x.\n        '''\n",
            "has no reset method",
        ),
        ("class Counter:\n    def reset(self, row):\n        pass\n", "reset takes **kwargs"),
        (
            "class Counter:\n    def reset(self, **kw):\n        pass\n    def get_reward(self, x):\n        pass\n",
            "get_reward takes no arguments besides self",
        ),
        (
            "class Counter:\n    def reset(self, **kw):\n        pass\n    def add(self, n):\n        '''A.'''\n",
            "parameter 'n' has no type hint",
        ),
        ("class Counter:\n    def reset(self, **kw):\n        pass\n", "has no public methods"),
        ("class Counter(dict):\n    def reset(self, **kw):\n        pass\n", "has no base classes"),
        (
            "class Counter:\n    def __init__(self, size):\n        pass\n    def reset(self, **kw):\n        pass\n",
            "give every parameter a default",
        ),
        (
            "class Counter:\n    def reset(self, **kw):\n        pass\n    @property\n    def add(self):\n        pass\n",
            "have no decorators",
        ),
        (
            "class Counter:\n    def reset(self, **kw):\n        pass\n    async def add(self):\n        pass\n",
            "not async",
        ),
        ("class Counter:\n  def reset(self", "line 2"),
    ],
)
def test_a_class_trl_could_not_use_is_refused_with_the_reason(code, message):
    with pytest.raises(ToolError, match=re.escape(message)):
        environment_signature(code, "Counter")


@pytest.fixture
def env():
    with EnvironmentSandbox(ENV, "Counter", methods=["add"], slot=3910, timeout_s=1.0) as sandbox:
        yield sandbox


@needs_sandbox
def test_instances_keep_their_own_state_in_the_sandbox(env):
    assert env.reset(1, {"start": 2}) is None
    assert env.reset(2, {"start": 10, "say": True}) == "Start at 10"
    assert env.call(1, "add", {"n": 3}) == "5"
    assert env.call(2, "add", {"n": 1}) == "11"
    assert env.reward(1) == 5.0 and env.reward(2) == 11.0
    env.reset(1, {})  # reset reuses the instance
    assert env.reward(1) == 0.0
    env.drop(2)
    with pytest.raises(Exception, match="is gone"):
        env.reward(2)


@needs_sandbox
@pytest.mark.parametrize(
    "act, kind, message",
    [
        (lambda e: e.reset(1, {"mode": "raise", "who": "oslo"}), "ValueError", "no start for oslo"),
        (lambda e: e.reset(1, {"mode": "number"}), "InvalidResult", "reset must return None or a str"),
        (lambda e: e.reset(1, {"mode": "loop"}), "Timeout", "did not finish within its time limit"),
        (lambda e: e.call(1, "add", {"n": 13}), "KeyError", "unlucky"),
        (lambda e: e.call(1, "add", {"n": 99}), "Crash", "exited with status 4"),
        (lambda e: e.call(1, "_secret", {}), "UnknownMethod", "no tool '_secret'"),
        (lambda e: e.call(1, "add", {"m": 1}), "TypeError", "unexpected keyword argument 'm'"),
        (lambda e: (e.call(1, "add", {"n": 7}), e.reward(1)), "RuntimeError", "seven"),
        (lambda e: (e.call(1, "add", {"n": 8}), e.reward(1)), "InvalidReward", "must return a float"),
    ],
)
def test_a_failing_environment_is_a_clear_error_in_time(env, act, kind, message):
    from rewards.sandbox import SandboxError

    env.reset(1, {})
    began = time.monotonic()
    with pytest.raises(SandboxError) as info:
        act(env)
    assert time.monotonic() - began < 10
    assert info.value.kind == kind and message in str(info.value)
    env.reset(1, {"start": 1})  # the environment serves on (a fresh worker after a crash or timeout)
    assert env.call(1, "add", {"n": 1}) == "2"


@needs_sandbox
def test_the_training_programs_stand_in_class_forwards_to_the_sandbox():
    from transformers.utils import get_json_schema

    from workers.training.tooling import EnvironmentFailed, ToolFailed, environment_factory

    config = TrainConfig(
        model="",
        dataset_path="",
        output_dir="",
        event_log="",
        rewards=[RewardSpec("r", builtin="accuracy")],
        sandbox_slot_base=3920,
        environment=ToolSpec("counter", "Counter", source=ENV),
    )
    factory, closers = environment_factory(config)
    try:
        assert factory.__name__ == "Counter"  # TRL's reward column for get_reward
        a, b = factory(), factory()
        assert get_json_schema(a.add) == {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add n to the total.",
                "parameters": {
                    "type": "object",
                    "properties": {"n": {"type": "integer", "description": "How much to add."}},
                    "required": ["n"],
                },
                "return": {"type": "string"},
            },
        }
        assert not hasattr(a, "_secret")
        a.reset(start=1)
        b.reset(start=5)
        assert a.add(n=2) == "3" and b.add(n=1) == "6" and a.get_reward() == 3.0
        with pytest.raises(ToolFailed, match="KeyError at line .*unlucky"):
            a.add(n=13)
        with pytest.raises(EnvironmentFailed, match=r"counter \(Counter.reset\): ValueError: .*no start for x"):
            a.reset(mode="raise", who="x")
        with pytest.raises(EnvironmentFailed, match=r"Counter.get_reward\): RuntimeError"):
            b.add(n=1), b.get_reward()
    finally:
        for closer in closers:
            closer.close()
