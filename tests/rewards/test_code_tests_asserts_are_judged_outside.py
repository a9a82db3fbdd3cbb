"""An assert test's verdict is decided where the completion's code cannot reach: the template interprets the test
and asks the test process only for the values of the expressions that need the code. Code that takes over its
process (a C-level trace or profile function set through ctypes, patched builtins or judge helpers, a copy of the
protocol followed by ``os._exit(0)``, ``sys.exit`` or ``raise SystemExit``) can choose those values and nothing else:
with no solution, ``assert RESULT == 42`` and ``assert add(1, 2) == 3`` fail, in every sandbox mode and through the
``code_tests`` reward, and the honest row of the same batch keeps its pass."""

from __future__ import annotations

import pytest

from rewards.builtins import BUILTINS
from rewards.sandbox import sandbox_support
from tests.rewards.test_code_tests_integrity import ADD, HONEST, assert_batch_answered

SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")

UNSOLVED = [{"assert": "assert RESULT == 42"}, {"assert": "assert add(1, 2) == 3"}]

# ``forge(data)``: given what the judge sent (a frame, or its body), write back the verdict or value that passes,
# to every descriptor, and end the process. Against a nonce: the verdict with the nonce. Against a question: True.
FORGE = """
import os, msgpack
_len = len
def forge(data):
    data = bytes(data)
    message = None
    for body in (data[4:], data):
        try:
            message = msgpack.unpackb(body, raw=False)
            break
        except Exception:
            pass
    if type(message) is not dict:
        return
    if "nonce" in message:
        reply = {"nonce": message["nonce"], "error": ""}
    elif "eval" in message or "exec" in message:
        reply = {"value": True}
    else:
        return
    body = msgpack.packb(reply, use_bin_type=True)
    for fd in range(3, 64):
        try:
            os.write(fd, _len(body).to_bytes(4, "big") + body)
        except OSError:
            pass
    os._exit(0)
def scan(frame):
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, (bytes, bytearray)) and _len(value) > 4:
                forge(value)
            if isinstance(value, dict) and ("nonce" in value or "eval" in value):
                forge(msgpack.packb(value, use_bin_type=True))
        frame = frame.f_back
"""

C_PROFILE = (
    FORGE
    + """
import ctypes, sys
HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.py_object, ctypes.c_int, ctypes.c_void_p)
def hook(obj, frame, what, arg):
    scan(frame)
    return 0
HOOK_C = HOOK(hook)
ctypes.pythonapi.PyEval_SetProfile.argtypes = [HOOK, ctypes.c_void_p]
ctypes.pythonapi.PyEval_SetProfile(HOOK_C, None)
assert sys.getprofile() is None
"""
)
C_TRACE = C_PROFILE.replace("PyEval_SetProfile", "PyEval_SetTrace").replace("getprofile", "gettrace")

PATCHED_LEN = (
    FORGE
    + """
import builtins, sys
def spy(obj):
    if isinstance(obj, (bytes, bytearray)) and _len(obj) > 4:
        forge(obj)
    scan(sys._getframe(1))
    return _len(obj)
builtins.len = spy
"""
)

# the judge's own helpers in the test process (child.py runs as __main__), each replaced by a spy
PATCHED_HELPERS = (
    FORGE
    + """
import sys
main = sys.modules["__main__"]
def spying(real):
    def spy(*args, **kwargs):
        scan(sys._getframe(1))
        for a in args:
            if isinstance(a, (bytes, bytearray)):
                forge(a)
        return real(*args, **kwargs)
    return spy
for name in ("_short", "_read_frame", "_write_frame", "_frame", "from_data", "to_data", "same_output"):
    if hasattr(main, name):
        setattr(main, name, spying(getattr(main, name)))
msgpack.unpackb = spying(msgpack.unpackb)
"""
)

# the protocol, imitated: say the code ran, read what the judge sends, answer it, end the process
IMITATE = (
    FORGE
    + """
import select
ran = msgpack.packb({"ran": True}, use_bin_type=True)
for fd in range(3, 64):
    try:
        os.write(fd, _len(ran).to_bytes(4, "big") + ran)
    except OSError:
        pass
for fd in range(3, 64):
    try:
        if select.select([fd], [], [], 0.5)[0]:
            data = os.read(fd, 1 << 16)
            message = msgpack.unpackb(data[4:], raw=False)
            if "nonce" in message:
                reply = {"nonce": message["nonce"], "error": ""}
            else:
                reply = {"value": True}
            body = msgpack.packb(reply, use_bin_type=True)
            for out in range(3, 64):
                try:
                    os.write(out, _len(body).to_bytes(4, "big") + body)
                except OSError:
                    pass
            for out in range(3, 64):  # nothing the process writes after this reaches the judge
                try:
                    os.close(out)
                except OSError:
                    pass
            EXIT
    except OSError:
        pass
"""
)

ATTACKS = {
    "ctypes PyEval_SetProfile": C_PROFILE,
    "ctypes PyEval_SetTrace": C_TRACE,
    "patched builtins.len": PATCHED_LEN,
    "patched judge helpers": PATCHED_HELPERS,
    "imitated, then os._exit(0)": IMITATE.replace("EXIT", "os._exit(0)"),
    "imitated, then sys.exit()": IMITATE.replace("EXIT", "import sys; sys.exit(0)"),
    "imitated, then raise SystemExit": IMITATE.replace("EXIT", "raise SystemExit"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_code_that_takes_over_its_process_cannot_pass_an_assert_it_does_not_solve(make_runner, attack):
    runner = make_runner()
    results = runner.run([(ATTACKS[attack], UNSOLVED), HONEST])
    assert not any(r.passed for r in results[0]), results[0]
    assert_batch_answered(runner, results)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_code_tests_reward_scores_such_code_zero(attack):
    completions = [f"```python\n{ADD}```", f"```python\n{ATTACKS[attack]}```"]
    tests = [[t["assert"] for t in UNSOLVED]] * 2
    assert BUILTINS["code_tests"](completions, tests=tests) == [0.5, 0.0]


# Code that looks through its process (the frames that called it, their code's constants and locals, every object
# the collector tracks) for the test's expected value and returns it.
FINDER = """
import gc, sys
def f():
    frame, seen = sys._getframe(1), []
    while frame is not None:
        seen += list(frame.f_code.co_consts) + list(frame.f_locals.values())
        frame = frame.f_back
    for o in seen + gc.get_objects():
        for v in ([o] if isinstance(o, str) else o if isinstance(o, (list, tuple)) else ()):
            if isinstance(v, str) and "answer" in v and "is 42" in v:
                return v
"""


def test_the_expected_value_never_enters_the_test_process(make_runner):
    runner = make_runner()
    results = runner.run([(FINDER, [{"assert": "assert f() == 'the answer is 42'"}]), HONEST])
    assert results[0][0].error == "AssertionError: ", results[0]
    assert_batch_answered(runner, results)


SOLVED = """
def add(a, b):
    return a + b
def squares(n):
    return [i * i for i in range(n)]
def pair(x):
    return (x, x)
def root(x):
    return x ** 0.5
def nothing():
    return None
"""


HONEST_FORMS = [
    "assert add(1, 2) == 3",
    "assert add(1, 2) == 3, 'one and two'",
    "assert add('a', 'b') == 'ab' and add(-1, 1) == 0",
    "assert squares(4) == [0, 1, 4, 9] and sorted(squares(3), reverse=True) == [4, 1, 0]",
    "assert all(squares(i + 1)[-1] == i * i for i in range(5))",
    "assert [add(i, i) for i in range(3)] == [0, 2, 4]",
    "assert pair(1) == (1, 1) and pair(1) != [1, 1]",
    "assert math.isclose(root(2), 1.41421, rel_tol=1e-4)",
    "assert abs(root(9) - 3) < 1e-9",
    "assert nothing() is None and isinstance(add(1, 1), int) and len(squares(5)) == 5",
    "assert {add(1, 1): 'two'} == {2: 'two'} and add(2 ** 70, 0) == 2 ** 70",
    "import math\nassert math.floor(root(10)) == 3",
    "x = squares(3)\nfor i, v in enumerate(x):\n    assert v == i * i",
    "pass",
]


def test_an_honest_solution_passes_asserts_of_every_common_form(make_runner):
    runner = make_runner(time_s=5.0)  # a pass ends each test at once; room for a loaded machine
    results = runner.run([(SOLVED, [{"assert": test} for test in HONEST_FORMS])])
    assert [(t, r.error) for t, r in zip(HONEST_FORMS, results[0], strict=True) if not r.passed] == []


def test_numpy_values_are_compared_as_their_lists(make_runner):
    runner = make_runner(time_s=10.0)  # importing numpy in a test process on a loaded machine
    code = "import numpy as np\ndef arr(n):\n    return np.arange(n)\n"
    test = "assert arr(3) == [0, 1, 2] and arr(3).sum() == 3 and arr(3)[1] == 1"
    results = runner.run([(code, [{"assert": test}])])
    assert results[0][0].passed, results[0]


FAILING_FORMS = [
    ("assert add(1, 2) == 4", "AssertionError: "),
    ("assert add(1, 2) == 4, 'one and two'", "AssertionError: one and two"),
    ("assert missing(1) == 2", "NameError: name 'missing' is not defined"),
    ("assert add(1, 2) < 'x'", "TypeError: '<' not supported between instances of 'int' and 'str'"),
    ("assert squares(2) * 10**9 == []", "the test builds a sequence too long for the judge"),
    ("assert add(10, 0) ** add(10**9, 0) == 0", "the test builds an integer too large for the judge"),
    ("assert sum(range(add(10**12, 0))) == 0", "the test builds a range too long for the judge"),
    # 30 answers of about 200 kB: more than an assert test's process may write (16 frames' worth)
    ("assert all(len(squares(40000)) > 0 for i in range(30))", "the test's values took more than the judge reads"),
    ("assert bytes(add(10**9, 0)) == b''", "the test builds a sequence too long for the judge"),
    ("assert ('-' * 10**5).join(str(i) for i in squares(100)) == ''", "the test builds a sequence too long"),
    ("x = [add(0, 0)]\nfor i in range(40):\n    x = x + x", "the test builds a sequence too long for the judge"),
    ("assert (lambda: 1)() == 1", "the judge cannot evaluate"),
    ("while True:\n    pass", "the judge runs asserts"),
    ("assert add(1,", "the test is not Python the judge can read"),
    ("assert object() == 1", "TypeError: a object is not a value the judge can compare"),
]


def test_a_failing_or_unbounded_test_fails_alone_with_its_reason(make_runner):
    runner = make_runner(time_s=10.0)  # none runs that long: the judge stops each first
    results = runner.run([(SOLVED, [{"assert": test} for test, _ in FAILING_FORMS]), HONEST])
    got = [r.error[: len(error)] if not r.passed else "passed" for (_, error), r in zip(FAILING_FORMS, results[0])]
    assert got == [error for _, error in FAILING_FORMS]
    assert_batch_answered(runner, results)
