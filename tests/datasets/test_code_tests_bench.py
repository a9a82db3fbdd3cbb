"""The code_tests bench's worker side (workers/code_bench.py): a solution against one row's tests in the sandbox,
each test's verdict as the code_tests reward judges it, its stdout and its time, and the row's total as the reward
scores it; a version the user may not see gets the same answer as one that is not there."""

from __future__ import annotations

import io
import json

import pytest

from rewards.code_tests import code_tests
from rewards.sandbox import sandbox_support
from rewards.sandbox.code import CodeRunner
from runs.datasets.services import dataset_import
from workers.code_bench import code_tests_bench

SUPPORT = sandbox_support()
pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}"),
]

ROWS = [
    {"prompt": "Write add(a, b).", "tests": json.dumps(["assert add(1, 2) == 3", "assert add(0, 0) == 0"])},
    {"prompt": "Print the sum of two numbers.", "tests": json.dumps([{"input": "1 2\n", "output": "3\n"}])},
]


@pytest.fixture
def tasks(owner):
    data = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    return dataset_import(owner=owner, name="bench-tasks", stream=io.BytesIO(data), source_name="tasks.jsonl")


def bench(owner, version, row, solution):
    return code_tests_bench(owner_id=owner.pk, dataset_version_id=version.pk, row=row, solution=solution)


def test_a_wrong_solution_shows_each_verdict_its_stdout_and_the_rewards_total(owner, tasks):
    solution = "def add(a, b):\n    print('adding', a, b)\n    return a - b\n"
    result = bench(owner, tasks, 1, solution)
    assert result["error"] is None
    assert [t["verdict"] for t in result["tests"]] == ["failed", "passed"]
    assert [t["test"] for t in result["tests"]] == ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]
    assert "adding 1 2" in result["tests"][0]["stdout"] and "adding 0 0" in result["tests"][1]["stdout"]
    assert all(t["time_s"] > 0 for t in result["tests"])
    # the total is the reward's own value for this completion on this row
    assert result["reward"] == 0.5 == code_tests([f"```python\n{solution}\n```"], [ROWS[0]["tests"]])[0]


def test_output_tests_show_what_the_code_printed_and_errors_and_timeouts_are_told_apart(owner, tasks):
    right = bench(owner, tasks, 2, "a, b = map(int, input().split())\nprint(a + b)\n")
    assert right["reward"] == 1.0 and right["tests"][0]["verdict"] == "passed"
    assert right["tests"][0]["stdout"].strip() == "3"
    wrong = bench(owner, tasks, 2, "print('no idea')\n")
    assert wrong["reward"] == 0.0 and wrong["tests"][0]["verdict"] == "failed"
    assert wrong["tests"][0]["stdout"].strip() == "no idea"
    raises = bench(owner, tasks, 1, "def add(a, b):\n    return a / 0\n")
    assert [t["verdict"] for t in raises["tests"]] == ["error", "error"]
    assert "ZeroDivisionError" in raises["tests"][0]["error"]
    loops = bench(owner, tasks, 2, "while True:\n    pass\n")
    assert loops["tests"][0]["verdict"] == "timed out" and loops["reward"] == 0.0


def test_a_fenced_completion_is_read_as_the_reward_reads_it(owner, tasks):
    completion = (
        "Try:\n```python\ndef add(a, b):\n    return 0\n```\nBetter:\n```python\ndef add(a, b):\n    return a + b\n```"
    )
    assert bench(owner, tasks, 1, completion)["reward"] == 1.0


def test_an_outsider_and_a_missing_row_get_a_clear_answer_and_nothing_runs(owner, outsider, tasks):
    hidden = bench(outsider, tasks, 1, "def add(a, b):\n    return a + b\n")
    assert hidden["error"] == "no such dataset version" and hidden["tests"] == [] and hidden["reward"] is None
    missing = bench(owner, tasks, 3, "x = 1\n")
    assert missing["error"] == "row 3: the version has rows 1 to 2" and missing["tests"] == []


def test_the_sandbox_adds_details_only_when_asked():
    code = "def add(a, b):\n    print('hi')\n    return a + b\n"
    with CodeRunner(slot=31, time_s=1.0, memory_mb=256) as runner:
        plain = runner.run([(code, [{"assert": "assert add(1, 2) == 3"}, {"stdin": "", "stdout": ""}])])
        detailed = runner.run(
            [(code, [{"assert": "assert add(1, 2) == 3"}, {"stdin": "", "stdout": "x"}])], details=True
        )
    assert [(r.passed, r.stdout, r.time_s) for r in plain[0]] == [(True, "", None), (True, "", None)]
    assert [r.passed for r in detailed[0]] == [True, False]
    assert detailed[0][1].stdout == "" and all(r.time_s > 0 for r in detailed[0])


@pytest.mark.parametrize(
    "error, shown",
    [
        ("timed out after 2 s", "timed out"),
        ("killed by its CPU limit", "timed out"),  # a busy loop on an idle machine: the CPU limit can act first
        ("killed by SIGSEGV", "error"),
        ("AssertionError", "failed"),
        ("wrong output: '4'", "failed"),
        ("ZeroDivisionError: division by zero", "error"),
    ],
)
def test_a_test_stopped_by_either_time_limit_timed_out(error, shown):
    from workers.code_bench import verdict

    assert verdict(False, error) == shown and verdict(True, "") == "passed"
