"""Every reward a sandbox hands back, a reward function's or an environment's get_reward, is finite and fits the
float32 tensor TRL gathers rewards into: 1e300, inf and nan are refused on the host (the worker's own check is not
trusted), naming the value."""

from __future__ import annotations

import pytest

from rewards.sandbox import Sandbox, SandboxError, sandbox_support
from rewards.sandbox.environment import EnvironmentSandbox

SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")

VALUES = {"1e300": "1e300", "-1e300": "-1e300", "inf": "float('inf')", "nan": "float('nan')"}

ENV = '''
class Scored:
    def reset(self, **row):
        self.value = row["value"]

    def ping(self) -> str:
        """Answer.
        """
        return "pong"

    def get_reward(self) -> float:
        return eval(self.value)
'''


@pytest.mark.parametrize("value", VALUES)
def test_a_reward_function_returning_a_value_float32_cannot_hold_is_refused(value):
    source = f"def f(completions, **kwargs):\n    return [{VALUES[value]} for _ in completions]\n"
    with Sandbox(source, "f", slot=3931, timeout_s=5.0) as sandbox, pytest.raises(SandboxError) as refused:
        sandbox.call(["a", "b"], {})
    assert refused.value.kind == "InvalidResult" and "rewards[0]" in str(refused.value)


@pytest.mark.parametrize("value", VALUES)
def test_an_environment_reward_float32_cannot_hold_is_refused(value):
    with EnvironmentSandbox(ENV, "Scored", methods=["ping"], slot=3932, timeout_s=5.0) as env:
        env.reset(1, {"value": VALUES[value]})
        with pytest.raises(SandboxError) as refused:
            env.reward(1)
        assert refused.value.kind == "InvalidReward" and "get_reward returned" in str(refused.value)
        env.reset(1, {"value": "3.0e38"})  # the largest rewards float32 holds still pass
        assert env.reward(1) == 3.0e38


@pytest.mark.parametrize("value", VALUES)
def test_a_logged_metric_float32_cannot_hold_is_refused(value):
    # TRL averages each log_metric name in a float32 tensor: one 1e300 or NaN spoils the step's figure
    source = (
        "def f(completions, log_metric, **kwargs):\n"
        f"    log_metric('fine', 1.0)\n    log_metric('spoiled', {VALUES[value]})\n"
        "    return [1.0 for _ in completions]\n"
    )
    with Sandbox(source, "f", slot=3933, timeout_s=5.0) as sandbox:
        with pytest.raises(SandboxError) as refused:
            sandbox.call(["a", "b"])
        assert refused.value.kind == "InvalidResult" and "log_metric('spoiled'" in str(refused.value)
        assert sandbox.faults == 0
