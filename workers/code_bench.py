"""What the code_tests bench's sandbox-queue task does (rewards/views.py ``code_tests_bench``): run a hand-written
solution against one dataset row's tests, as the ``code_tests`` reward would score it, and say per test what
happened.

The verdicts and the row's total are the reward's own: ``rewards.code_tests.code_tests`` is called on the row as
TRL would call it. Each test's stdout and time come from a second run of the same template with ``details``
(rewards/sandbox/code.py): an output test as it is; an assert test as an output test of the code followed by the
assert, so that what the code and the functions the assert calls print is seen (the reward's own assert run keeps
no output). All of it runs in the sandbox, on this worker, never in the web process.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from rewards.code_tests import code_tests, extract_code, parse_tests, runner
from rewards.sandbox import SandboxError
from runs.access import visible_versions
from runs.datasets.code_bench import MAX_ROW, TESTS_COLUMN, bench_row, test_label

MAX_BENCH_TESTS = 200  # tests of one row the bench runs


def as_completion(solution: str) -> str:
    """The solution as a completion the reward reads: pasted with its fences as it is, plain code fenced."""
    return solution if extract_code(solution) is not None else f"```python\n{solution}\n```"


def verdict(passed: bool, error: str) -> str:
    """passed, failed (the test's check did not hold), timed out, or error (the code raised, or was stopped). A test
    stopped by its wall-clock limit or by its CPU limit timed out: a busy loop meets both at about the same moment
    (the CPU limit is the time limit, rounded up), and which one the kernel acts on first is a race."""
    if passed:
        return "passed"
    if error.startswith(("timed out", "killed by its CPU limit")):
        return "timed out"
    if error.startswith(("AssertionError", "wrong output")):
        return "failed"
    return "error"


def code_tests_bench(*, owner_id: int, dataset_version_id: int, row: int, solution: str) -> dict:
    """``solution`` against row ``row``'s tests: {"tests": [{"test", "verdict", "error", "stdout", "time_s"}],
    "reward": the code_tests value, "error": why nothing ran, or None}."""
    result = {"owner_id": owner_id, "dataset_version_id": dataset_version_id, "row": row, "tests": []}
    result.update(reward=None, error=None)
    owner = get_user_model().objects.filter(pk=owner_id).first()
    version = visible_versions(owner).filter(pk=dataset_version_id).first() if owner is not None else None
    if version is None:  # the same answer for a version that is not there and one that is not theirs
        result["error"] = "no such dataset version"
        return result
    if TESTS_COLUMN not in (version.reward_columns or []):
        result["error"] = f"this dataset version has no `{TESTS_COLUMN}` column for code_tests to read"
        return result
    data = bench_row(version, row)
    if data is None:
        result["error"] = f"row {row}: the version has rows 1 to {min(version.row_count, MAX_ROW)}"
        return result
    value = data["rewards"][TESTS_COLUMN]
    try:
        cases = parse_tests(value)
    except (ValueError, TypeError, AttributeError) as exc:
        result["error"] = f"row {row}: its tests cannot be read: {exc}"
        return result
    if not cases:
        result["error"] = f"row {row} has no tests: code_tests scores it None (not applicable)"
        return result
    if len(cases) > MAX_BENCH_TESTS:
        result["error"] = f"row {row} has {len(cases)} tests; the bench runs at most {MAX_BENCH_TESTS}"
        return result
    completion = as_completion(solution)
    logged: dict = {}
    try:
        rewards = code_tests([completion], [value], log_extra=lambda column, values: logged.update({column: values}))
        code = extract_code(completion)
        jobs = [
            (code, [case]) if "stdin" in case else (f"{code}\n{case['assert']}\n", [{"stdin": "", "stdout": ""}])
            for case in cases
        ]
        details = [r[0] for r in runner().run(jobs, details=True)]
    except SandboxError as exc:
        result["error"] = f"the sandbox could not run the tests: {exc}"
        return result
    result["reward"] = rewards[0]
    outcomes = (logged.get("code_tests") or [[]])[0]
    if rewards[0] is not None and len(outcomes) != len(cases):
        result["error"] = "the reward logged no outcome for these tests"
        return result
    for i, case in enumerate(cases):
        outcome = outcomes[i] if i < len(outcomes) else {"passed": False, "error": "the reward abstained (None)"}
        result["tests"].append(
            {
                "test": test_label(case),
                "verdict": verdict(outcome["passed"], outcome["error"]),
                "error": outcome["error"],
                "stdout": details[i].stdout,
                "time_s": details[i].time_s,
            }
        )
    return result
