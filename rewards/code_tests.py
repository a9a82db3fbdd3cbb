"""The built-in ``code_tests`` reward, as R1-style code training uses it: run the completion's code against the row's
test cases and score the share that passes.

    code_tests(completions, tests=None, verification_info=None, **kwargs) -> list[float | None]

- The code is the last fenced block of the completion (```python ... ```, or any ``` block when there is no
  python one); a completion without one scores 0.0.
- ``tests`` (a dataset column, one value per completion) is a list of assert statements (``"assert add(1, 2) ==
  3"``), or a list of stdin/stdout pairs (``{"input": "1 2\\n", "output": "3\\n"}``), or either as JSON text. A row
  without tests scores None (TRL: not applicable).
- Without a ``tests`` column, open-r1's ``verification_info`` column (its code datasets' format: ``{"language":
  "python", "test_cases": [{"input": ..., "output": ..., "type": "stdin_stdout"}]}``, or that as JSON text) gives
  the tests, each run as stdin/stdout, as open-r1's ``code`` reward runs them (in E2B or Morph, with python3).
- Each test runs in a sandboxed process of its own (rewards/sandbox/code.py) with ``TIME_S`` seconds and
  ``MEMORY_MB`` of memory; all completions of a batch share one warm template per training process.
- With TRL's ``log_extra`` the outcome of every test is logged per completion in the ``code_tests`` column
  (``[{"test": ..., "passed": ..., "error": ...}]``), which the rollout browser shows under each transcript.
- The sandbox's template judges each test itself (an assert on the plain values of the expressions that need the
  code, which the test process computes: it never sees the expected values); a completion that forges frames or
  otherwise attacks the judge fails all its tests (0.0), each error reading ``"attacked the judge: ..."``
  (docs/sandbox.md, "Reward integrity").

It is trusted code that drives the sandbox, run in the training process like the other built-ins; unlike them it
is not a library template users copy (a copy would run inside a reward sandbox, which cannot fork).
"""

from __future__ import annotations

import atexit
import json
import re
import threading

from rewards.sandbox import SandboxError
from rewards.sandbox.code import CodeRunner

TIME_S = 2.0
MEMORY_MB = 256
SLOT = 3999  # the code-test template's sandbox slot (uid 61000 + slot), apart from the runs' reward slots
FENCE = re.compile(r"```([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)

_runner = None
_lock = threading.Lock()


def extract_code(text) -> str | None:
    """The last ```python block of a completion (a string or a conversation), else its last ``` block."""
    if not isinstance(text, str):
        text = text[-1]["content"] if text else ""
    blocks = FENCE.findall(text)
    python = [code for lang, code in blocks if lang.lower() in ("python", "py", "python3")]
    chosen = python or [code for _, code in blocks]
    return chosen[-1] if chosen else None


def parse_tests(value) -> list[dict]:
    """A row's tests as the runner takes them: ``{"assert": src}`` or ``{"stdin": ..., "stdout": ...}``."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text)
        except ValueError:
            value = [line for line in text.splitlines() if line.strip()]
    if isinstance(value, dict):
        value = [value]
    tests = []
    for case in value or []:
        if isinstance(case, str):
            tests.append({"assert": case})
        elif isinstance(case, dict):
            stdin = case.get("input", case.get("stdin", ""))
            stdout = case.get("output", case.get("stdout", ""))
            tests.append({"stdin": str(stdin), "stdout": str(stdout)})
        else:
            raise ValueError(f"a test case is a str (an assert) or an input/output dict, not {type(case).__name__}")
    return tests


def open_r1_tests(value) -> list:
    """open-r1's ``verification_info`` of a row, as ``parse_tests`` takes tests: its test cases, each run as
    stdin/stdout as open-r1's code_reward runs them (with python3, whatever its ``language`` says)."""
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict) or not isinstance(value.get("test_cases"), list):
        raise ValueError('verification_info: an object with a "test_cases" list, as open-r1\'s code datasets hold')
    return value["test_cases"]


def runner():
    """This process's code-test template, started on first use and closed at exit. Weak mode follows
    ``GRPO_SANDBOX_ALLOW_WEAK``, as for every sandbox."""
    global _runner
    with _lock:
        if _runner is None:
            _runner = CodeRunner(slot=SLOT, time_s=TIME_S, memory_mb=MEMORY_MB)
            atexit.register(_runner.close)
        return _runner


def code_tests(completions, tests=None, verification_info=None, log_extra=None, **kwargs):
    """The share of the row's tests each completion's code passes; 0.0 without code, None without tests."""
    if tests is None:
        if verification_info is None:
            raise TypeError("code_tests needs the row's tests: a `tests` column, or open-r1's `verification_info`")
        tests = [open_r1_tests(v) for v in verification_info]
    rows = [(extract_code(c), parse_tests(t)) for c, t in zip(completions, tests, strict=True)]
    jobs = [(code, cases) for code, cases in rows if code is not None and cases]
    try:
        results = iter(runner().run(jobs)) if jobs else iter(())
    except SandboxError as exc:
        if exc.kind == "SandboxUnavailable":
            raise
        results = iter([[None] * len(cases) for _, cases in jobs])  # the template was lost: these abstain
    rewards, logged = [], []
    for code, cases in rows:
        if not cases:
            rewards.append(None)
            logged.append([])
        elif code is None:
            rewards.append(0.0)
            logged.append([{"test": _label(case), "passed": False, "error": "no fenced code block"} for case in cases])
        else:
            outcome = next(results)
            if outcome and outcome[0] is None:
                rewards.append(None)
                logged.append([])
                continue
            rewards.append(sum(r.passed for r in outcome) / len(cases))
            logged.append(
                [{"test": _label(case), "passed": r.passed, "error": r.error} for case, r in zip(cases, outcome)]
            )
    if log_extra is not None:
        log_extra("code_tests", logged)
    return rewards


def _label(case: dict) -> str:
    return case["assert"][:200] if "assert" in case else f"stdin {case['stdin'][:100]!r}"
