"""Per-step (process) scores logged from the sandbox come back as the structure they were logged as, not as text:
``{"split": str, "scores": [float or None]}`` per completion (rewards/step_scores.py), within bounds; anything else in
the ``step_scores`` column is the function's error naming it and the column, and a forged reply is a ProtocolError."""

from __future__ import annotations

import inspect
import math

import pytest

from rewards.library import equation_steps as library_module
from rewards.library import function
from rewards.sandbox import SandboxError, sandbox_support
from rewards.sandbox.errors import WorkerLost
from rewards.sandbox.replies import checked_logs
from rewards.step_scores import MAX_SPLIT_CHARS, MAX_STEP_SCORES

SUPPORT = sandbox_support()
WORKED = "12 + 7 = 19\nthen 19 * 2 = 38\nso 38 - 5 = 33"
SLIP = "12 + 7 = 20\n\\boxed{40}"


@pytest.fixture
def sandbox(started_sandboxes):
    return lambda source, name: started_sandboxes(source, name, timeout_s=5.0)


def logging(body: str) -> str:
    """``f`` logs ``body``'s value as the step_scores of every completion, then scores 1."""
    return (
        "import math\n"
        "def f(completions, log_extra, **kwargs):\n"
        f"    value = {body}\n"
        "    log_extra('step_scores', [value] * len(completions))\n"
        "    return [1.0] * len(completions)\n"
    )


needs_sandbox = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")


@needs_sandbox
def test_the_libraries_equation_steps_run_in_the_sandbox_logs_what_it_logs_in_process(sandbox):
    sb = sandbox(inspect.getsource(library_module), "equation_steps")
    extra: dict = {}
    result = sb.call([WORKED, SLIP, "no sums"], log_extra=lambda column, values: extra.setdefault(column, values))
    in_process: dict = {}
    rewards = function("equation_steps")(
        [WORKED, SLIP, "no sums"], log_extra=lambda column, values: in_process.setdefault(column, values)
    )
    assert result.rewards == rewards == [1.0, 0.0, 0.0]
    assert (
        extra["step_scores"]
        == in_process["step_scores"]
        == [
            {"split": "\n", "scores": [1.0, 1.0, 1.0]},
            {"split": "\n", "scores": [0.0, None]},
            {"split": "\n", "scores": [None]},
        ]
    )


@needs_sandbox
def test_tuples_ints_a_pattern_and_none_come_back_as_floats_lists_and_none(sandbox):
    sb = sandbox(
        "def f(completions, log_extra, **kwargs):\n"
        "    log_extra('step_scores', [{'split': r'\\n\\n+', 'pattern': True, 'scores': (1, None, 0.25)}, None])\n"
        "    log_extra('other', [{'a': 1}, 2])\n"  # any other column: scalars, everything else as text
        "    return [1.0, 0.0]\n",
        "f",
    )
    result = sb.call(["a", "b"])
    assert result.logged_extra["step_scores"] == [
        {"split": "\\n\\n+", "pattern": True, "scores": [1.0, None, 0.25]},
        None,
    ]
    assert [type(s) for s in result.logged_extra["step_scores"][0]["scores"]] == [float, type(None), float]
    assert result.logged_extra["other"] == ["{'a': 1}", 2]


@needs_sandbox
@pytest.mark.parametrize(
    "body, why",
    [
        ("{'split': '\\n', 'scores': [1.0, math.nan]}", "values[0] has scores[1] = nan, not a finite number or None"),
        ("{'split': '\\n', 'scores': [math.inf]}", "values[0] has scores[0] = inf"),
        ("{'split': '\\n', 'scores': ['0.5']}", "values[0] has scores[0] = '0.5'"),
        (f"{{'split': '\\n', 'scores': [1.0] * {MAX_STEP_SCORES + 1}}}", f"not a list of at most {MAX_STEP_SCORES}"),
        (
            f"{{'split': 'x' * {MAX_SPLIT_CHARS + 1}, 'scores': []}}",
            f"a string of at most {MAX_SPLIT_CHARS} characters",
        ),
        ("{'split': '\\n', 'scores': [], 'pattern': 'yes'}", "has a pattern that is not True or False"),
        ("{'split': '\\n', 'steps': []}", "has the keys 'split', 'steps', not split and scores"),
        ("[1.0, 0.0]", "values[0] is a list"),
        ("'1.0 0.0'", "values[0] is a str"),
    ],
)
def test_a_step_scores_value_of_another_shape_is_the_functions_error_naming_the_column(sandbox, body, why):
    sb = sandbox(logging(body), "f")
    with pytest.raises(SandboxError) as refused:
        sb.call(["a", "b"])
    assert refused.value.kind == "InvalidResult" and sb.faults == 0
    assert refused.value.message.startswith("f: log_extra('step_scores', values): ")
    assert why in refused.value.message
    assert sb.running  # the user's error, not a fault: the worker lives on


@needs_sandbox
def test_the_most_steps_allowed_come_back_whole(sandbox):
    sb = sandbox(logging(f"{{'split': '\\n', 'scores': [0.5] * {MAX_STEP_SCORES}}}"), "f")
    result = sb.call(["a", "b"])
    assert [len(v["scores"]) for v in result.logged_extra["step_scores"]] == [MAX_STEP_SCORES] * 2


@pytest.mark.parametrize(
    "value",
    [
        {"split": "\n", "scores": [math.nan]},
        {"split": "\n", "scores": [1]},  # an honest worker sends floats only
        {"split": "\n", "scores": [True]},
        {"split": "\n", "scores": "1.0"},
        {"split": "\n", "scores": [0.5] * (MAX_STEP_SCORES + 1)},
        {"split": "x" * (MAX_SPLIT_CHARS + 1), "scores": []},
        {"split": "\n", "scores": [], "pattern": 1},
        {"split": "\n", "scores": [], "extra": 1},
        {"scores": []},
        "{'split': '\\n', 'scores': []}",
        [0.5],
    ],
)
def test_the_host_refuses_a_forged_step_scores_value(value):
    with pytest.raises(WorkerLost, match="malformed"):
        checked_logs([["step_scores", [value]]], [])


def test_the_host_counts_each_step_against_the_log_value_cap():
    honest = {"split": "\n", "scores": [0.5] * MAX_STEP_SCORES}
    extra, _ = checked_logs([["step_scores", [honest, None]]], [])
    assert extra == {"step_scores": [honest, None]}
    with pytest.raises(WorkerLost, match="more than 100000 logged values"):
        checked_logs([["step_scores", [honest] * 25]], [])  # 25 x 4098 values
