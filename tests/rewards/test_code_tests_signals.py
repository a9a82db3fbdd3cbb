"""A test process that ends on a signal Python has no name for (real-time signals, 32 to 64) fails its own test;
every other row of the batch keeps its result, and the template answers the batch (no fault, no abstention)."""

from __future__ import annotations

import pytest

from rewards.builtins import BUILTINS
from rewards.sandbox import sandbox_support
from tests.rewards.test_code_tests_integrity import ADD, HONEST, assert_batch_answered

SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")


def kills_itself(sig: int) -> str:
    return f"import os\nos.kill(os.getpid(), {sig})\n"


def test_a_signal_without_a_name_fails_only_its_own_row(make_runner):
    runner = make_runner(parallel=2)
    signals = [40, 50, 63]  # real-time signals between SIGRTMIN and SIGRTMAX: no signal.Signals member
    jobs = [(kills_itself(sig), [{"assert": "assert True"}, {"stdin": "", "stdout": ""}]) for sig in signals]
    results = runner.run([*jobs, HONEST])
    for sig, row in zip(signals, results, strict=False):
        assert [r.error for r in row] == [f"killed by signal {sig}"] * 2, row
    assert_batch_answered(runner, results)


def test_a_completion_that_sends_itself_signal_40_scores_zero_and_the_others_keep_their_rewards():
    completions = [f"```python\n{ADD}```", f"```python\n{kills_itself(40)}{ADD}```", f"```python\n{ADD}```"]
    tests = [["assert add(1, 2) == 3"]] * 3
    assert BUILTINS["code_tests"](completions, tests=tests) == [1.0, 0.0, 1.0]
