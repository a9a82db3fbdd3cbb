"""The code_tests reward: a completion's fenced code against the row's tests, each test in a confined process forked
from a warm template; the pass share comes back, and each test's outcome is logged for the transcript."""

from __future__ import annotations

import json

import pytest
from grpo_web_protocol.demo_data import PYTHON_TASKS, python_task_rows

from rewards.builtins import BUILTINS
from rewards.code_tests import extract_code, parse_tests
from rewards.sandbox import sandbox_support
from rewards.sandbox.code import CodeRunner

SUPPORT = sandbox_support()
needs_sandbox = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")
ADD = "def add(a, b):\n    return a + b\n"


def fenced(code: str, lang: str = "python") -> str:
    return f"Here is my answer.\n```{lang}\n{code}```\nDone."


@pytest.fixture(scope="module")
def runner():
    with CodeRunner(slot=30, time_s=1.0, memory_mb=256) as r:
        yield r


def test_the_last_python_block_is_the_code():
    text = "```\nignored = 1\n```\n```python\nfirst = 1\n```\nthen\n```python\nlast = 2\n```"
    assert extract_code(text) == "last = 2\n"
    assert extract_code("```\nplain = 3\n```") == "plain = 3\n"
    assert extract_code([{"role": "assistant", "content": fenced("x = 1\n")}]) == "x = 1\n"
    assert extract_code("no code at all") is None


def test_tests_come_as_asserts_or_input_output_pairs_or_their_json():
    assert parse_tests(["assert f(1) == 2"]) == [{"assert": "assert f(1) == 2"}]
    assert parse_tests('[{"input": "1 2", "output": "3"}]') == [{"stdin": "1 2", "stdout": "3"}]
    assert parse_tests("assert f(1) == 2\nassert f(2) == 3\n") == [
        {"assert": "assert f(1) == 2"},
        {"assert": "assert f(2) == 3"},
    ]
    with pytest.raises(ValueError):
        parse_tests([3])


@needs_sandbox
def test_the_reward_is_the_pass_share_and_each_outcome_is_logged():
    logged = {}
    completions = [fenced(ADD), fenced("def add(a, b):\n    return a - b\n"), "no code", fenced(ADD)]
    tests = [["assert add(1, 2) == 3", "assert add(0, 0) == 0"]] * 3 + [[]]
    rewards = BUILTINS["code_tests"](completions, tests=tests, log_extra=lambda col, v: logged.update({col: v}))
    assert rewards == [1.0, 0.5, 0.0, None]
    first, second, third, fourth = logged["code_tests"]
    assert [t["passed"] for t in first] == [True, True]
    assert second[0] == {"test": "assert add(1, 2) == 3", "passed": False, "error": "AssertionError: "}
    assert third[0]["error"] == "no fenced code block" and fourth == []


# a row of open-r1's code datasets (open-r1/verifiable-coding-problems-python's shape), its tests in
# `verification_info`, as open-r1's `code` reward reads them
VERIFICATION_INFO = {
    "language": "python",
    "test_cases": [
        {"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"},
        {"input": "5 7\n", "output": "12\n", "type": "stdin_stdout"},
    ],
}


@needs_sandbox
def test_open_r1_s_verification_info_gives_the_tests_without_a_tests_column():
    solve = fenced("a, b = map(int, input().split())\nprint(a + b)\n")
    wrong = fenced("a, b = map(int, input().split())\nprint(a * b)\n")
    info = [VERIFICATION_INFO, json.dumps(VERIFICATION_INFO), VERIFICATION_INFO]  # as a dict or as JSON text
    assert BUILTINS["code_tests"]([solve, solve, wrong], verification_info=info) == [1.0, 1.0, 0.0]
    # a `tests` column, where the row has one, is what runs
    assert BUILTINS["code_tests"]([solve], tests=[["assert False"]], verification_info=info[:1]) == [0.0]
    with pytest.raises(TypeError, match="a `tests` column, or open-r1's `verification_info`"):
        BUILTINS["code_tests"]([solve])
    with pytest.raises(ValueError, match='verification_info: an object with a "test_cases" list'):
        BUILTINS["code_tests"]([solve], verification_info=[{"language": "python"}])


@needs_sandbox
def test_stdin_stdout_tests_compare_output_line_by_line(runner):
    code = "a, b = map(int, input().split())\nprint(a + b, ' ')\n"
    results = runner.run([(code, [{"stdin": "1 2\n", "stdout": "3\n\n"}, {"stdin": "2 2", "stdout": "5"}])])[0]
    assert [r.passed for r in results] == [True, False] and results[1].error.startswith("wrong output")


@needs_sandbox
@pytest.mark.parametrize(
    "code, error",
    [
        # a busy loop meets its CPU limit or the wall clock first, whichever the machine's load makes come first
        ("while True:\n    pass\n", ("timed out after 1 s", "killed by its CPU limit")),
        ("import time\ntime.sleep(30)\n", "timed out after 1 s"),
        ("x = bytearray(1 << 30)\n", "MemoryError"),
        ("import os\nos.fork()\n", "PermissionError"),
        ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n", "PermissionError"),
        ("open('written', 'w').write('x')\n", "PermissionError"),
        ("import socket\nsocket.create_connection(('127.0.0.1', 5432))\n", "PermissionError"),
        ("import ctypes\nctypes.string_at(0)\n", "killed by SIGSEGV"),
        ("import os\nos.chmod('/dev/null', 0)\n", "PermissionError"),
    ],
)
def test_each_test_is_confined_and_a_hostile_one_costs_only_itself(runner, code, error):
    results = runner.run([(code, [{"assert": "pass"}]), (ADD, [{"assert": "assert add(2, 2) == 4"}])])
    assert not results[0][0].passed and results[0][0].error.startswith(error)
    assert results[1][0].passed  # the next test, from the same template
    assert runner.faults == 0 and runner.running


@needs_sandbox
def test_a_test_cannot_write_to_the_hosts_pipe_or_leave_state_for_the_next(runner):
    leak = "import builtins, os, sys\nbuiltins.LEAKED = 1\nos.write(int(sys.argv[2]), b'forged reply')\n"
    results = runner.run(
        [(leak, [{"assert": "pass"}]), ("", [{"assert": "import builtins\nassert not hasattr(builtins, 'LEAKED')"}])]
    )
    assert results[0][0].error == "OSError: [Errno 9] Bad file descriptor"  # the template's pipe to the host
    assert results[1][0].passed and runner.faults == 0


@needs_sandbox
def test_the_demo_tasks_reference_solutions_pass_their_tests(runner):
    rows = python_task_rows(len(PYTHON_TASKS) * 2, seed=1)
    results = runner.run([(row["solution"], parse_tests(json.loads(row["tests"]))) for row in rows])
    assert all(r.passed for row in results for r in row), [r for row in results for r in row if not r.passed]
    assert {row["task"] for row in rows} == {name for name, *_ in PYTHON_TASKS}


@needs_sandbox
def test_two_templates_on_one_slot_both_run_their_tests():
    """code_tests uses one fixed slot: the templates of two runs on a machine then share a uid."""
    with CodeRunner(slot=31, time_s=1.0) as first, CodeRunner(slot=31, time_s=1.0) as second:
        for runner in (first, second, first):
            assert runner.run([(ADD, [{"assert": "assert add(1, 1) == 2"}])])[0][0].passed


@needs_sandbox
def test_a_test_that_closes_its_pipes_and_sleeps_times_out_alone(runner):
    hang = (
        "import os, time\nfor fd in range(3, 64):\n    try:\n        os.close(fd)\n    except OSError:\n"
        "        pass\ntime.sleep(30)\n"
    )
    results = runner.run([(hang, [{"assert": "pass"}]), (ADD, [{"assert": "assert add(1, 2) == 3"}])])
    assert results[0][0].error == "timed out after 1 s" and results[1][0].passed  # the judge reads no EOF


@needs_sandbox
def test_tests_run_in_parallel_processes_each_with_its_own_deadline():
    with CodeRunner(slot=32, time_s=1.0, parallel=2) as runner:
        slow, fast = "import time\ntime.sleep(30)\n", ADD
        results = runner.run([(slow, [{"assert": "pass"}] * 2), (fast, [{"assert": "assert add(1, 2) == 3"}] * 6)])
    assert [r.error for r in results[0]] == ["timed out after 1 s"] * 2
    assert all(r.passed for r in results[1])


@needs_sandbox
def test_a_templates_small_cpu_budget_caps_its_tests_limits_instead_of_failing_them():
    with CodeRunner(slot=33, time_s=5.0, cpu_limit_s=1) as runner:  # the template's hard CPU limit: 2 s
        spin = "while True:\n    pass\n"
        results = runner.run([(spin, [{"assert": "pass"}]), (ADD, [{"assert": "assert add(1, 2) == 3"}])])
    assert results[0][0].error == "killed by its CPU limit" and results[1][0].passed
