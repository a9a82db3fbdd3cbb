"""log_extra columns and log_metric names are capped by number and length, per call and over a run: TRL keeps every
column it is given for the whole run and writes every metric name into each logged step, so it is the names, not the
values, that grow the training process and the metrics table. Past a cap the call is that function's error
(``LogTooLarge``, naming it; the worker lives on), or a ProtocolError where a forged reply carries the names."""

from __future__ import annotations

import textwrap

import pytest

from rewards.sandbox import Sandbox, SandboxCrash, SandboxError, sandbox_support
from rewards.sandbox.replies import MAX_LOG_NAMES, MAX_RUN_LOG_NAMES

SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")

PROBE = ["ab", "abcd"]


def source(body: str) -> str:
    """``scored`` logs what ``body`` says (with ``log_extra``, ``log_metric``, ``start`` and ``count`` from the
    call's columns), then scores length."""
    return (
        "import os, sys, msgpack\n"
        "def scored(completions, log_extra, log_metric, start=(0,), count=(0,), seq=(0,), **kwargs):\n"
        "    start, count = start[0], count[0]\n"
        f"{textwrap.indent(textwrap.dedent(body), ' ' * 4)}\n"
        "    return [float(len(c)) for c in completions]\n"
    )


@pytest.fixture
def sandbox(started_sandboxes):
    slots = iter(range(3940, 4000))

    def make(body: str, **kwargs) -> Sandbox:
        return started_sandboxes(source(body), "scored", slot=next(slots), timeout_s=10.0, **kwargs)

    return make


def call(sb: Sandbox, start: int = 0, count: int = 0):
    return sb.call(PROBE, start=[start] * 2, count=[count] * 2)


COLUMNS = "for i in range(start, start + count):\n    log_extra(f'col{i}', [i] * len(completions))"
METRICS = "for i in range(start, start + count):\n    log_metric(f'metric{i}', float(i))"


def test_64_columns_and_64_metric_names_in_one_call_pass():
    body = COLUMNS + "\n" + METRICS
    with Sandbox(source(body), "scored", slot=3939, timeout_s=10.0) as sb:
        result = call(sb, count=MAX_LOG_NAMES)
    assert len(result.logged_extra) == MAX_LOG_NAMES and len(result.logged_metrics) == MAX_LOG_NAMES
    assert result.rewards == [2.0, 4.0]


@pytest.mark.parametrize("body, what", [(COLUMNS, "log_extra columns"), (METRICS, "log_metric names")])
def test_one_call_logging_65_names_is_an_error_of_that_function(sandbox, body, what):
    sb = sandbox(body)
    with pytest.raises(SandboxError) as refused:
        call(sb, count=MAX_LOG_NAMES + 1)
    assert refused.value.kind == "LogTooLarge"
    assert f"scored: log_extra / log_metric recorded more than {MAX_LOG_NAMES} {what}" in refused.value.message
    assert sb.faults == 0  # the user's error: the worker lives on
    assert call(sb, count=3).rewards == [2.0, 4.0]


def test_a_hundred_thousand_one_value_columns_within_the_value_caps_are_refused(sandbox):
    # 100,000 values and ~1 M characters: inside both of the older caps, and 100,000 columns TRL would keep.
    sb = sandbox("for i in range(100_000):\n    log_extra(f'c{i}', [1])")
    with pytest.raises(SandboxError) as refused:
        call(sb)
    assert refused.value.kind == "LogTooLarge" and sb.faults == 0


def test_a_long_column_or_metric_name_is_refused(sandbox):
    sb = sandbox("log_extra('c' * 201, [1, 2])")
    with pytest.raises(SandboxError) as refused:
        call(sb)
    assert refused.value.kind == "LogTooLarge" and "200 characters" in refused.value.message
    sb = sandbox("log_metric('m' * 100_000, 1.0)")
    with pytest.raises(SandboxError) as refused:
        call(sb)
    assert refused.value.kind == "LogTooLarge" and "200 characters" in refused.value.message


def test_a_column_logged_many_times_in_one_call_is_one_column(sandbox):
    sb = sandbox("for i in range(1000):\n    log_extra('tests', [i])\n    log_metric('m', 1.0)")
    result = call(sb)
    assert result.logged_extra == {"tests": list(range(1000))}
    assert result.logged_metrics == {"m": [1.0] * 1000}


@pytest.mark.parametrize("body, what", [(COLUMNS, "log_extra columns"), (METRICS, "log_metric names")])
def test_new_names_call_after_call_stop_at_the_runs_cap(sandbox, body, what):
    sb = sandbox(body)
    per_call = 60
    for k in range(MAX_RUN_LOG_NAMES // per_call):  # 4 calls, 240 names
        call(sb, start=k * per_call, count=per_call)
    with pytest.raises(SandboxError) as refused:
        call(sb, start=240, count=per_call)  # 300 names in the run
    assert refused.value.kind == "LogTooLarge" and sb.faults == 0
    assert f"scored has logged 300 distinct {what} in this run; the limit is {MAX_RUN_LOG_NAMES}" in str(refused.value)
    # names logged before go on, and new ones up to the cap: the refused call added none
    assert call(sb, start=0, count=per_call).rewards == [2.0, 4.0]
    call(sb, start=240, count=MAX_RUN_LOG_NAMES - 240)
    with pytest.raises(SandboxError):
        call(sb, start=MAX_RUN_LOG_NAMES, count=1)


def test_the_caps_are_settings_of_the_sandbox(sandbox):
    sb = sandbox(COLUMNS, log_names=2, run_log_names=3)
    call(sb, count=2)
    with pytest.raises(SandboxError, match="more than 2 log_extra columns"):
        call(sb, count=3)
    with pytest.raises(SandboxError, match="4 distinct log_extra columns in this run; the limit is 3"):
        call(sb, start=2, count=2)


FORGED = """
import msgpack
reply = {"id": seq[0], "ok": True, "stdout": "", "truncated": False, "rewards": [0.0] * len(completions),
         "extra": EXTRA, "metrics": METRICS}
body = msgpack.packb(reply, use_bin_type=True)
os.write(int(sys.argv[2]), len(body).to_bytes(4, "big") + body)
"""


@pytest.mark.parametrize(
    "extra, metrics",
    [
        ("[[f'c{i}', [1]] for i in range(100_000)]", "[]"),  # the older caps let all of these through
        ("[[f'c{i}', []] for i in range(150_000)]", "[]"),
        ("[]", "[[f'm{i}', 1.0] for i in range(65)]"),
        ("[['c' * 1000, [1]]]", "[]"),
    ],
)
def test_a_forged_reply_flooding_names_costs_the_worker(sandbox, extra, metrics):
    sb = sandbox(FORGED.replace("EXTRA", extra).replace("METRICS", metrics))
    with pytest.raises(SandboxCrash) as refused:
        sb.call(PROBE, seq=[sb._seq + 1] * 2)
    assert refused.value.kind == "ProtocolError" and sb.faults == 1
    assert sb.logged_columns == set() and sb.logged_metrics == set()
