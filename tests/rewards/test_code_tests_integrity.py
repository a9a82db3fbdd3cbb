"""The code_tests reward against completions that attack the judge rather than the task: forge a pass, copy a
sibling row's solution, make an honest row fail, hang the warm template, send a verdict with a field missing.

Each attack runs next to an honest row in the same batch, from the same template, in every sandbox mode the kernel
allows here (a private root, and the fallback on the host's uid); the honest row must keep its result, the template
must answer the batch (no fault, no abstention), and an attack on the judge fails every test of its row, marked.
"""

from __future__ import annotations

import pytest

from rewards.builtins import BUILTINS
from rewards.sandbox import sandbox_support
from rewards.sandbox.code import CodeRunner

SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")

ADD = "def add(a, b):\n    return a + b\n"
HONEST = (ADD, [{"assert": "assert add(1, 2) == 3"}])
ATTACKED = "attacked the judge: "

# The descriptors a test process holds: pipes it may read (``READS``) or write (``WRITES``), 0-2 aside.
FDS = """
import os, stat, fcntl
def fifos(mode):
    out = []
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == mode:
                out.append(fd)
        except OSError:
            pass
    return out
READS, WRITES = fifos(os.O_RDONLY), fifos(os.O_WRONLY)
"""


def to_every_fd(payload: str) -> str:
    """Code that writes ``payload`` (a bytes expression) to every descriptor it has, then ends its process."""
    return (
        "import os, msgpack\nfor fd in range(3, 64):\n    try:\n"
        f"        os.write(fd, {payload})\n    except OSError:\n        pass\nos._exit(0)\n"
    )


OLD_PASS = to_every_fd("msgpack.packb({'passed': True, 'error': ''})")  # yesterday's verdict record


def framed(message: str) -> str:
    """A bytes expression: ``message`` (a dict expression) framed as the test processes' protocol frames it."""
    return f"(lambda b: len(b).to_bytes(4, 'big') + b)(msgpack.packb({message}, use_bin_type=True))"


def assert_batch_answered(runner: CodeRunner, results) -> None:
    assert results[-1][0].passed, results[-1]  # the honest row, from the same template
    assert runner.faults == 0 and runner.running


@pytest.mark.parametrize(
    "code, flagged",
    [
        (OLD_PASS, True),  # a verdict record written to every pipe, then exit 0
        (to_every_fd(framed("{'nonce': b'0' * 16, 'error': ''}")), True),  # a pass with a guessed nonce
        # a verdict without waiting for the judge: the judge decides "assert False" on its own once the code ran
        (to_every_fd(framed("{'ran': True}") + " + " + framed("{'error': ''}")), False),
        ("import os\nos._exit(0)\n", False),  # an early exit is no pass
        ("import builtins\nbuiltins.AssertionError = SystemExit\n", False),
        ("import builtins\nbuiltins.exec = lambda *a, **k: None\n", False),  # the test's exec, made a no-op
        ("import sys\nsys._getframe(1).f_locals['test']['assert'] = 'pass'\n", False),  # its test, rewritten
        (
            "import msgpack\nreal = msgpack.packb\nmsgpack.packb = lambda o, **k: real({**o, 'passed': True}, **k)\n",
            True,  # its frames, rewritten: none is one the judge expects
        ),
        ("import sys\nsys.settrace(lambda *a: None)\n", False),  # a tracer: the test runs in the template
    ],
)
def test_an_assert_test_cannot_be_passed_by_a_forged_verdict(make_runner, code, flagged):
    runner = make_runner()
    results = runner.run([(code, [{"assert": "assert False"}, {"assert": "assert 1 == 2"}]), HONEST])
    assert not any(r.passed for r in results[0])
    assert all(r.error.startswith(ATTACKED) for r in results[0]) is flagged, results[0]
    assert_batch_answered(runner, results)


@pytest.mark.parametrize(
    "code",
    [
        OLD_PASS,  # a verdict without the output it printed
        to_every_fd(framed("{'stdout': '', 'error': '', 'passed': True}")),
        to_every_fd(framed("{'nonce': b'0' * 16, 'error': ''}")),
        to_every_fd("(1 << 18).to_bytes(4, 'big') + b'x' * (1 << 20)"),  # a flood, blocked on a full pipe
    ],
)
def test_an_output_test_is_judged_by_the_output_the_template_compares(make_runner, code):
    runner = make_runner()
    results = runner.run([(code, [{"stdin": "1 2\n", "stdout": "3\n"}]), HONEST])
    assert not results[0][0].passed and results[0][0].error.startswith(ATTACKED), results[0]
    assert_batch_answered(runner, results)


@pytest.mark.parametrize(
    "code",
    [
        to_every_fd(framed("{'stdout': '3'}")),  # an output verdict without its error field
        to_every_fd(framed("{'nonce': None}")),  # an assert verdict without its error field
        to_every_fd(framed("{}")),
        to_every_fd("b'\\x00\\x00\\x00'"),  # part of a frame header
    ],
)
def test_a_verdict_with_a_field_missing_is_a_failure_not_a_pass(make_runner, code):
    runner = make_runner()
    results = runner.run([(code, [{"stdin": "1 2\n", "stdout": "3\n"}, {"assert": "assert False"}]), HONEST])
    assert [r.passed for r in results[0]] == [False, False] and results[0][0].error.startswith(ATTACKED)
    assert_batch_answered(runner, results)


def test_a_test_process_holds_no_other_rows_code_or_tests(make_runner):
    """It looks through its interpreter's frames and objects for another row's solution (and the expected outputs),
    and runs what it finds: nothing of the batch but its own job is there."""
    thief = """
import gc, sys
def scan(o, depth=0):
    if depth > 2:
        return
    if isinstance(o, dict):
        code = o.get("code")
        if isinstance(code, str) and ("return a " + "+ b") in code:
            raise LookupError(code)
        if o.get("stdout") == "sec" + "ret":
            raise LookupError(ADD_FROM_EXPECTED)
        for v in list(o.values()):
            scan(v, depth + 1)
    elif isinstance(o, (list, tuple)):
        for v in list(o):
            scan(v, depth + 1)
ADD_FROM_EXPECTED = "def add(a, b):\\n    return a " + "+ b\\n"
frames, f = [], sys._getframe()
while f is not None:
    frames.append(dict(f.f_locals))
    f = f.f_back
try:
    for o in frames + [o for o in gc.get_objects() if isinstance(o, (dict, list))]:
        scan(o)
except LookupError as found:
    exec(found.args[0])
"""
    runner = make_runner(parallel=1)
    output_row = ("print('sec' + 'ret')\n", [{"stdin": "", "stdout": "sec" + "ret"}])
    results = runner.run([output_row, (thief, [{"assert": "assert add(1, 2) == 3"}]), HONEST])
    assert results[0][0].passed
    assert not results[1][0].passed and results[1][0].error.startswith("NameError"), results[1]
    assert_batch_answered(runner, results)


# Reads every pipe it can read, without waiting (for all who share them), for most of a second.
THIEF = (
    FDS
    + """
import time
for fd in READS:
    os.set_blocking(fd, False)
end = time.monotonic() + 0.8
while time.monotonic() < end:
    for fd in READS:
        try:
            os.read(fd, 1 << 16)
        except OSError:
            pass
"""
)


def test_a_test_process_cannot_steal_a_siblings_verdict(make_runner):
    """The honest row runs first and takes a while; the thieves, started next, read every pipe they can read (a
    race each time an honest process reports: three batches of four)."""
    runner = make_runner(parallel=8, time_s=3.0)  # the honest tests wake among four spinning thieves
    slow = (ADD + "import time\ntime.sleep(0.4)\n", [{"assert": "assert add(1, 2) == 3"}] * 4)
    for _ in range(3):
        results = runner.run([slow, (THIEF, [{"assert": "pass"}] * 4), HONEST])
        assert all(r.passed for r in results[0]), results[0]
        assert_batch_answered(runner, results)


def test_a_pair_of_test_processes_cannot_hang_the_template(make_runner):
    """One writes a byte at a time to every pipe it can write and lives on; the next reads every pipe it can read,
    so that the template, woken for a byte, would find none. Both fail; the batch is answered in time."""
    trickle = FDS + (
        "import time\nfor _ in range(40):\n    for fd in WRITES:\n        os.write(fd, b'x')\n"
        "    time.sleep(0.02)\ntime.sleep(30)\n"
    )
    thief = FDS + "while READS:\n    for fd in READS:\n        os.read(fd, 1)\n"
    runner = make_runner(parallel=4)
    thieves = [(thief, [{"assert": "pass"}]), (THIEF, [{"assert": "pass"}] * 2)]
    results = runner.run([(trickle, [{"assert": "pass"}]), *thieves, HONEST])
    assert results[0][0].error.startswith(ATTACKED) and not results[1][0].passed, results[:2]
    assert_batch_answered(runner, results)


def test_a_test_process_that_leaves_its_pipes_non_blocking_does_not_fail_the_next_in_its_slot(make_runner):
    spoil = FDS + "for fd in READS + WRITES:\n    os.set_blocking(fd, False)\n"
    big = "\u00e9" * 60000  # 120 kB of UTF-8: more than a pipe holds at once
    runner = make_runner(parallel=1)
    results = runner.run([(spoil, [{"assert": "pass"}]), (f"print({big!r})\n", [{"stdin": "", "stdout": big}]), HONEST])
    assert results[1][0].passed, results[1]
    assert_batch_answered(runner, results)


def test_a_row_that_attacks_the_judge_scores_zero_and_says_so_in_its_log():
    logged = {}
    forged = OLD_PASS.replace("os._exit(0)\n", "os._exit(0)\n" + ADD)
    completions = [f"```python\n{ADD}```", f"```python\n{forged}```"]
    tests = [["assert add(1, 2) == 3", "assert add(2, 2) == 4"]] * 2
    rewards = BUILTINS["code_tests"](completions, tests=tests, log_extra=lambda col, v: logged.update({col: v}))
    assert rewards == [1.0, 0.0]
    assert all(t["error"].startswith(ATTACKED) and not t["passed"] for t in logged["code_tests"][1])
