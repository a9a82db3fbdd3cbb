"""Tools run in the sandbox, as reward functions do, and a hostile or broken tool costs the run nothing but an error
the model reads: an exception, a result too large, an endless loop or a dead worker each come back as a clear
message (TRL shows it as ``{"error": ...}`` and counts a failure), within the time limit, and the next call works.
A tool whose worker keeps being lost is disabled. No database: the sandbox and the training program's tools never
import Django."""

from __future__ import annotations

import time

import pytest
from grpo_web_protocol.config import RewardSpec, ToolSpec, TrainConfig

from rewards.sandbox import sandbox_support
from rewards.sandbox.tool import ToolSandbox
from rewards.toolspec import MAX_TOOL_RESULT_CHARS

SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")

TOOL = '''
import os


def echo(text: str, mode: str = "ok") -> str:
    """Echo the text, or misbehave.

    Args:
        text: What to echo.
        mode: ok, raise, huge, loop, exit, read, object or die-later.
    """
    if mode == "raise":
        raise ValueError("no such city: " + text)
    if mode == "huge":
        return "x" * 10_000_000
    if mode == "loop":
        while True:
            pass
    if mode == "exit":
        os._exit(3)
    if mode == "read":
        return open("/etc/shadow").read()
    if mode == "object":
        return {"echo": text, "n": 2}
    if mode == "die-later":  # a POSIX timer kills the worker 20 ms on, frozen between calls
        import ctypes
        import signal

        libc, event, timer = ctypes.CDLL(None), ctypes.create_string_buffer(64), ctypes.c_void_p()
        ctypes.c_int.from_buffer(event, 8).value = signal.SIGKILL  # struct sigevent's sigev_signo, SIGEV_SIGNAL
        assert libc.timer_create(1, event, ctypes.byref(timer)) == 0
        assert libc.timer_settime(timer, 0, (ctypes.c_long * 4)(0, 0, 0, 20_000_000), None) == 0
        return "armed"
    return text.upper()
'''


@pytest.fixture
def tool():
    with ToolSandbox(TOOL, "echo", slot=3900, timeout_s=1.0) as sandbox:
        yield sandbox


def test_a_tool_returns_its_result_as_text_as_trl_shows_it(tool):
    assert tool.invoke({"text": "oslo"}) == "OSLO"
    assert tool.invoke({"text": "oslo", "mode": "object"}) == str({"echo": "oslo", "n": 2})


@pytest.mark.parametrize(
    "mode, kind, message",
    [
        ("raise", "ValueError", "no such city: oslo"),
        ("huge", "ResultTooLarge", f"the limit is {MAX_TOOL_RESULT_CHARS}"),
        ("loop", "Timeout", "did not finish within its time limit"),
        ("exit", "Crash", "exited with status 3"),
        ("read", "PermissionError", ""),
    ],
)
def test_a_failing_tool_is_a_clear_error_in_time_and_the_next_call_works(tool, mode, kind, message):
    from rewards.sandbox import SandboxError

    began = time.monotonic()
    with pytest.raises(SandboxError) as info:
        tool.invoke({"text": "oslo", "mode": mode})
    assert time.monotonic() - began < 10  # the endless loop is killed at timeout_s, not waited on
    assert info.value.kind in (kind, "FileNotFoundError") and message in str(info.value)
    assert tool.invoke({"text": "again"}) == "AGAIN"


def test_arguments_the_function_does_not_take_are_an_error_not_a_crash(tool):
    from rewards.sandbox import SandboxError

    with pytest.raises(SandboxError, match="unexpected keyword argument 'city'"):
        tool.invoke({"city": "oslo"})
    with pytest.raises(SandboxError, match="JSON object"):
        tool.invoke(["oslo"])


def test_the_training_programs_tool_raises_the_sandbox_message_and_is_disabled_after_its_faults(tmp_path):
    from workers.training.tooling import ToolFailed, tool_functions

    config = TrainConfig(
        model="",
        dataset_path="",
        output_dir="",
        event_log="",
        rewards=[RewardSpec("r", builtin="accuracy")],
        max_tool_faults=2,
        tools=[ToolSpec("echo", "echo", source=TOOL), ToolSpec("calculator", "calculator", builtin="calculator")],
        sandbox_slot_base=3800,
    )
    (echo, calculator), closers = tool_functions(config)
    try:
        assert echo.__name__ == "echo" and calculator.__name__ == "calculator"
        assert calculator(expression="6 * 7") == "42"
        assert echo(text="oslo") == "OSLO"
        with pytest.raises(ToolFailed, match="ValueError at line 13: no such city: x"):
            echo(text="x", mode="raise")
        for _ in range(2):  # two lost workers: the tool is disabled
            with pytest.raises(ToolFailed, match="Crash"):
                echo(text="x", mode="exit")
        with pytest.raises(ToolFailed, match="disabled for this run after 2 faults"):
            echo(text="oslo")
        with pytest.raises(ToolFailed, match="unsupported expression"):
            calculator(expression="__import__('os').system('true')")
    finally:
        for closer in closers:
            closer.close()


def test_a_tool_whose_worker_dies_between_calls_is_disabled_after_its_faults():
    from workers.training.tooling import ToolFailed, tool_functions

    config = TrainConfig(
        model="",
        dataset_path="",
        output_dir="",
        event_log="",
        rewards=[RewardSpec("r", builtin="accuracy")],
        max_tool_faults=2,
        tools=[ToolSpec("echo", "echo", source=TOOL)],
        sandbox_slot_base=3800,
    )
    (echo,), closers = tool_functions(config)
    outcomes = []
    try:
        for _ in range(6):
            try:
                outcomes.append(echo(text="x", mode="die-later"))
            except ToolFailed as exc:
                outcomes.append(str(exc))
            time.sleep(0.2)  # its timer kills the frozen worker
    finally:
        for closer in closers:
            closer.close()
    # each death between calls fails the call that finds it, and spends the budget: no silent respawns
    assert outcomes[0] == outcomes[2] == "armed"
    assert "between calls, the worker running echo was killed by SIGKILL" in outcomes[1] and outcomes[1] == outcomes[3]
    assert outcomes[4:] == ["the tool echo is disabled for this run after 2 faults"] * 2
