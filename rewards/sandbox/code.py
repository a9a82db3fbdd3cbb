"""Code-execution tests in the sandbox: run a completion's code against test cases, each test in a process of its
own with its own time and memory limit, forked from a warm, locked-down template (a fresh interpreter per test would
cost ~50 ms; a fork costs about 1 ms).

    with CodeRunner(slot=3, time_s=2.0, memory_mb=256) as runner:
        results = runner.run([(code, [{"assert": "assert add(1, 2) == 3"}, {"stdin": "1 2\\n", "stdout": "3"}])])
        results[0][1].passed, results[0][1].error

The template is a sandbox worker (private root, own uid, rlimits, Landlock, seccomp) that runs no user code itself:
its seccomp filter allows one thing more, a plain fork. Before its first batch it forks a spawner, which never holds
a batch; each test process is forked by the spawner, closes every descriptor but its slot's two pipes, lowers its
CPU and memory limits, enters a nested Landlock domain in which nothing is writable and neither the template nor the
spawner can be signalled, installs the full seccomp filter (no further process), and only then reads its own code
and test (never the expected output) from its pipe, runs them and sends back frames. The template judges them
itself and kills each test process at its time limit. The host checks the template's replies as strictly as a
reward worker's.

``passed`` is the template's judgement: for an output test its own comparison of what the process printed; for an
assert test its own run of the assert, in which the test process only answers, as plain data, the values of the
expressions that need the code (``add(1, 2)``): the process never holds the test, its expected values or a
verdict. A row whose process attacked the judge (forged frames, a field missing, a flood) fails all its tests with
an error ``"attacked the judge: ..."``. What an assert test can still not rule out is in docs/sandbox.md ("Reward
integrity").
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import msgpack

from rewards.sandbox.host import Sandbox, SandboxCrash, SandboxError

MAX_TESTS = 4096  # tests in one run() call
MAX_CODE_CHARS = 1 << 20
MAX_STDOUT_CHARS = 1 << 16  # what the template keeps of a test's output


@dataclass(frozen=True)
class TestResult:
    passed: bool
    error: str  # "" when passed; the exception, "timed out after 2 s", "wrong output: ...", "attacked the judge: ..."
    stdout: str = ""  # with ``details``: what an output test's process printed ("" for an assert test)
    time_s: float | None = None  # with ``details``: the test process's seconds, spawn to reaping


class CodeRunner(Sandbox):
    """A warm template whose spawner forks one confined process per test. See the module docstring."""

    # RLIMIT_NPROC counts every process of the uid, and templates of concurrent runs may share one (code_tests uses
    # a fixed slot): room for several. Test processes cannot fork at all (seccomp), so this is not what stops them.
    MODE, NPROC = "tests", 64

    def __init__(
        self, *, slot: int = 0, time_s: float = 2.0, memory_mb: int = 256, parallel: int | None = None, **kwargs
    ):
        kwargs.setdefault("memory_mb", max(1024, memory_mb))
        super().__init__("", "code_tests", slot=slot, **kwargs)
        self.time_s, self.test_memory_mb = float(time_s), int(memory_mb)
        self.parallel = max(1, min(parallel or os.cpu_count() or 1, 8))  # test processes at a time

    def run(self, jobs: list[tuple[str, list[dict]]], *, details: bool = False) -> list[list[TestResult]]:
        """For each (code, tests): one TestResult per test. A test is ``{"assert": source}`` (run after the code)
        or ``{"stdin": text, "stdout": expected}`` (compared line by line, trailing whitespace aside). ``details``
        (the code_tests bench, rewards/bench.py): each result also has its ``stdout`` and ``time_s``; the verdicts
        are the same. Raises SandboxError kinds only."""
        tests = sum(len(t) for _, t in jobs)
        if tests > MAX_TESTS or any(len(code) > MAX_CODE_CHARS for code, _ in jobs):
            raise SandboxError(
                f"at most {MAX_TESTS} tests and {MAX_CODE_CHARS} characters of code per run", kind="InvalidInput"
            )
        with self._lock:
            self._seq += 1
            request = {
                "op": "tests",
                "id": self._seq,
                "time_s": self.time_s,
                "memory_mb": self.test_memory_mb,
                "jobs": [{"code": code, "tests": cases} for code, cases in jobs],
            }
            if details:  # a reward's requests stay as they were
                request["details"] = True
            body = msgpack.packb(request, use_bin_type=True)
            limit_s = self.timeout_s + tests * (self.time_s + 1.0)  # the template kills each test at time_s
            shape = [len(t) for _, t in jobs]
            return self._request(body, limit_s, lambda reply: self._results(reply, shape, details))[0]

    def _results(self, reply, shape: list[int], details: bool = False) -> list[list[TestResult]]:
        """The template's reply, exactly as an honest template sends it; ValueError otherwise."""
        if (
            type(reply) is not dict
            or reply.keys() != {"id", "ok", "results"}
            or reply["id"] != self._seq
            or reply["ok"] is not True
            or type(reply["results"]) is not list
            or len(reply["results"]) != len(shape)
        ):
            raise ValueError("not a results message for this request")
        out = []
        for results, n in zip(reply["results"], shape, strict=True):
            if type(results) is not list or len(results) != n:
                raise ValueError("results of the wrong shape")
            row = []
            for r in results:
                if (
                    type(r) is not dict
                    or not r.keys() <= ({"passed", "error", "stdout", "time_s"} if details else {"passed", "error"})
                    or type(r.get("passed")) is not bool
                    or type(r.get("error", "")) is not str
                    or len(r.get("error", "")) > 500
                ):
                    raise ValueError("a malformed test result")
                row.append(TestResult(r["passed"], r.get("error", ""), *(_details(r) if details else ())))
            out.append(row)
        return out


def _details(r: dict) -> tuple[str, float]:
    """A result's ``stdout`` and ``time_s``, as an honest template sends them; ValueError otherwise."""
    stdout, seconds = r.get("stdout"), r.get("time_s")
    if type(stdout) is not str or len(stdout) > MAX_STDOUT_CHARS:
        raise ValueError("a test result's stdout is missing or too long")
    if type(seconds) not in (int, float) or not math.isfinite(seconds) or not 0 <= seconds < 1e6:
        raise ValueError("a test result's time is missing or out of range")
    return stdout, float(seconds)


__all__ = ["CodeRunner", "SandboxCrash", "SandboxError", "TestResult"]
