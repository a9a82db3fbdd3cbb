"""How many test executions per second does the ``code_tests`` reward sustain?

    python -m bench.code_reward [--batches 6] [--batch 64]   (from the repo root)

Each batch is ``--batch`` completions of the demo's Python tasks (``grpo_web_protocol.demo_data.python_task_rows``, four
tests per row), half of them the reference solution in a fenced block and half a wrong one, scored by
``BUILTINS["code_tests"]`` exactly as the training process calls it: every test in its own confined process, forked
from the warm template. The template starts once (its start is printed apart) and a warm-up batch runs first.

The last line is ``code_tests_per_s=<tests executed per second>``, for scripts to grep (goal: at least 100 on two
cores; a fresh interpreter per test would give about 20).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry import parse_args  # noqa: E402 (after the path is set)

WRONG = "def wrong():\n    pass\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=6, help="timed batches (default 6)")
    parser.add_argument("--batch", type=int, default=64, help="completions per batch (default 64)")
    args = parse_args(parser, argv, batches=1, batch=16)

    from grpo_web_protocol.demo_data import python_task_rows

    from rewards import code_tests as reward
    from rewards.builtins import BUILTINS

    rows = python_task_rows(args.batch * (args.batches + 1), seed=0)
    batches = []
    for b in range(args.batches + 1):
        part = rows[b * args.batch : (b + 1) * args.batch]
        completions = [f"```python\n{row['solution'] if i % 2 == 0 else WRONG}```" for i, row in enumerate(part)]
        batches.append((completions, [row["tests"] for row in part]))
    code_tests = BUILTINS["code_tests"]

    began = time.perf_counter()
    reward.runner().start()
    start_s = time.perf_counter() - began
    code_tests(batches[0][0], tests=batches[0][1])  # warm-up
    per_s, total_tests, total_s = [], 0, 0.0
    for completions, tests in batches[1:]:
        n = sum(len(json.loads(t)) for t in tests)
        began = time.perf_counter()
        rewards = code_tests(completions, tests=tests)
        took = time.perf_counter() - began
        assert rewards[0] == 1.0 and rewards[1] == 0.0, rewards[:2]
        per_s.append(n / took)
        total_tests += n
        total_s += took
    isolation = reward.runner().isolation
    print(
        f"{args.batches} batches of {args.batch} completions, {total_tests // args.batches} tests each; template: "
        f"uid {isolation.get('uid')}, landlock {isolation.get('landlock')}, seccomp {isolation.get('seccomp')}, "
        f"private mounts {isolation.get('private_mounts')}; started in {1000 * start_s:.0f} ms"
    )
    print(
        f"per batch: median {statistics.median(per_s):.0f} tests/s, min {min(per_s):.0f}, max {max(per_s):.0f}; "
        f"{1000 * total_s / total_tests:.2f} ms per test"
    )
    print(f"code_tests_per_s={total_tests / total_s:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
