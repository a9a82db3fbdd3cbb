"""What does the sandbox cost? One reward function called in-process and in its persistent sandboxed worker.

    python -m bench.sandbox_overhead [--rounds 40] [--batch 64] [--chars 2000] [--starts 5]   (from the repo root)

The reward is what a GRPO run on maths uses: +0.5 for the format (``<think>...</think>`` then a ``\\boxed{}``
answer) and +1 when the last boxed answer equals the row's ``answer`` column by math-verify (``parse`` / ``verify``,
with their default signal.alarm timeouts, which work in the worker: it runs calls on its main thread). The same
source text is exec'd in this process and started in the sandbox, and both get the same batches.

Each round draws a fresh batch of ``--batch`` completions of about ``--chars`` characters (GRPO never scores the
same completions twice, so neither variant gets to reuse math-verify's parse cache more than the other) and times
one call of each variant, in alternating order. The per-round ratio sandboxed / in-process is taken, and its median
is the figure. A sandboxed call is timed from ``Sandbox.call`` to its return: packing, both pipe transfers, the
worker's unpacking and the host's checks of the reply are all in it.

The median start time of a fresh worker is printed too, for a source that imports math-verify and for a trivial one,
and the round trip of a cheap reward (TRL's length reward) on the same batches, median over ``--rounds`` calls, as
``sandbox_roundtrip_ms=<x>`` (goal: at most 0.1 ms): that is the sandbox's own cost per call, with the thaw before
and the freeze after it, the CPU-time read and every check of the reply. Beside it, ``pipe_roundtrip_ms=<x>``: the
floor any process boundary has, the same batches packed with msgpack through a plain pipe to a child that unpacks
them and answers with as many floats (no isolation, no checks).
The last line is ``sandbox_overhead_ratio=<median ratio>``, for scripts to grep (goal: at most 1.15).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file (python bench/sandbox_overhead.py): make `rewards` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry import parse_args  # noqa: E402 (after the path is set)

REWARD_SOURCE = r'''
import re

from math_verify import parse, verify

THINK_THEN_BOXED = re.compile(r"^\s*<think>.*?</think>.*?\\boxed\{.+?\}", re.DOTALL)


def last_boxed(text):
    """Content of the last \boxed{...}, braces balanced; None if there is none."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed{")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            if depth == 0:
                return text[i:j]
            depth -= 1
    return None


def math_reward(completions, answer, **kwargs):
    rewards = []
    for completion, expected in zip(completions, answer):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        score = 0.5 if THINK_THEN_BOXED.match(text) else 0.0
        boxed = last_boxed(text)
        if boxed is not None and verify(parse(f"${expected}$"), parse(f"${boxed}$")):
            score += 1.0
        rewards.append(score)
    return rewards
'''
FUNC = "math_reward"
LENGTH_SOURCE = """
def reward_len(completions, **kwargs):
    return [-abs(20 - len(completion)) for completion in completions]
"""
WORDS = (
    "so",
    "we",
    "have",
    "the",
    "sum",
    "of",
    "then",
    "wait",
    "let",
    "me",
    "check",
    "again",
    "multiply",
    "by",
    "carry",
    "which",
    "gives",
    "hmm",
    "that",
    "is",
    "not",
    "right",
    "divide",
    "both",
    "sides",
)


def make_batch(rng: random.Random, size: int, chars: int) -> tuple[list[str], list[str]]:
    """``size`` completions of about ``chars`` characters, with their ``answer`` column."""
    completions, answers = [], []
    for _ in range(size):
        a, b = rng.randint(10, 999), rng.randint(10, 999)
        right = a * b
        words = []
        while sum(len(w) + 1 for w in words) < chars - 80:
            words.append(rng.choice(WORDS) if rng.random() < 0.8 else str(rng.randint(0, 9999)))
        reasoning = " ".join(words)
        kind = rng.random()
        if kind < 0.15:
            answer_text = f"The product is {right}."  # no box
        else:
            given = right if kind < 0.6 else right + rng.randint(1, 50)
            shown = rf"\frac{{{2 * given}}}{{2}}" if rng.random() < 0.2 else str(given)  # equal, written otherwise
            answer_text = rf"The answer is \boxed{{{shown}}}."
        think = rng.random() < 0.8
        completions.append(f"<think>{reasoning}</think> {answer_text}" if think else f"{reasoning} {answer_text}")
        answers.append(str(right))
    return completions, answers


PIPE_CHILD = """
import struct, sys
import msgpack
read, write = sys.stdin.buffer.read, sys.stdout.buffer.write
while header := read(4):
    completions, answers = msgpack.unpackb(read(struct.unpack("<I", header)[0]))
    reply = msgpack.packb([float(len(c)) for c in completions])
    write(struct.pack("<I", len(reply)) + reply)
    sys.stdout.buffer.flush()
"""


def pipe_round_trips(batches: list[tuple[list[str], list[str]]], warmup: int) -> list[float]:
    """Seconds per batch through a plain pipe to a child that unpacks it and answers: a process boundary's floor."""
    import struct
    import subprocess

    import msgpack

    child = subprocess.Popen([sys.executable, "-c", PIPE_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    trips = []
    try:
        for i, (completions, answers) in enumerate(batches):
            began = time.perf_counter()
            payload = msgpack.packb([completions, answers])
            child.stdin.write(struct.pack("<I", len(payload)) + payload)
            child.stdin.flush()
            size = struct.unpack("<I", child.stdout.read(4))[0]
            assert len(msgpack.unpackb(child.stdout.read(size))) == len(completions)
            if i >= warmup:
                trips.append(time.perf_counter() - began)
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    return trips


def median_start(source: str, starts: int) -> float:
    from rewards.sandbox import Sandbox

    times = []
    for _ in range(starts):
        sb = Sandbox(source, FUNC, timeout_s=30)
        try:
            sb.start()
            times.append(sb.start_time_s)
        finally:
            sb.close()
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="batches, each scored by both variants (default 40)")
    parser.add_argument("--batch", type=int, default=64, help="completions per call (default 64)")
    parser.add_argument("--chars", type=int, default=2000, help="characters per completion (default 2000)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls of each variant first (default 3)")
    parser.add_argument("--starts", type=int, default=5, help="fresh worker starts to time (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parse_args(parser, argv, rounds=3, batch=16, warmup=1, starts=1)

    from rewards.sandbox import Sandbox

    rng = random.Random(args.seed)
    namespace: dict = {"__name__": "bench_reward"}
    exec(compile(REWARD_SOURCE, "<bench reward>", "exec"), namespace)
    in_process = namespace[FUNC]

    trivial = f"def {FUNC}(completions, **kwargs):\n    return [0.0] * len(completions)\n"
    start_trivial = median_start(trivial, args.starts)
    start_math = median_start(REWARD_SOURCE, args.starts)

    times = {"in-process": [], "sandboxed": []}
    ratios = []
    with Sandbox(REWARD_SOURCE, FUNC, timeout_s=60) as sb:
        for _ in range(args.warmup):
            completions, answers = make_batch(rng, args.batch, args.chars)
            assert sb.call(completions, answer=answers).rewards == in_process(completions, answer=answers)
        for r in range(args.rounds):
            completions, answers = make_batch(rng, args.batch, args.chars)
            took = {}
            order = ("in-process", "sandboxed") if r % 2 == 0 else ("sandboxed", "in-process")
            for variant in order:
                began = time.perf_counter()
                if variant == "sandboxed":
                    rewards = sb.call(completions, answer=answers).rewards
                else:
                    rewards = in_process(completions, answer=answers)
                took[variant] = time.perf_counter() - began
                if variant == "sandboxed":
                    sandboxed_rewards = rewards
                else:
                    expected = rewards
            if sandboxed_rewards != expected:
                raise SystemExit(f"round {r}: the sandbox scored differently: {sandboxed_rewards} != {expected}")
            for variant, seconds in took.items():
                times[variant].append(seconds)
            ratios.append(took["sandboxed"] / took["in-process"])
        isolation = sb.isolation
        faults = sb.faults
    # The transport alone, low-noise: the same batch through a worker whose function does nothing.
    with Sandbox(trivial, FUNC) as sb:
        for _ in range(args.warmup):
            sb.call(completions, answer=answers)
        round_trips = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            sb.call(completions, answer=answers)
            round_trips.append(time.perf_counter() - began)

    with Sandbox(LENGTH_SOURCE, "reward_len") as sb:
        batches = [make_batch(rng, args.batch, args.chars) for _ in range(args.rounds)]
        for completions, answers in batches[: args.warmup]:
            sb.call(completions, answer=answers)
        length_trips = []
        for completions, answers in batches:
            began = time.perf_counter()
            sb.call(completions, answer=answers)
            length_trips.append(time.perf_counter() - began)
    pipe_trips = pipe_round_trips(batches, args.warmup)

    size = sum(len(c) for c in completions) / len(completions)
    print(
        f"{args.rounds} rounds, {args.batch} completions of ~{size:.0f} chars per call, alternated; "
        f"worker: uid {isolation.get('uid')}, landlock {isolation.get('landlock')}, "
        f"seccomp {isolation.get('seccomp')}, private mounts {isolation.get('private_mounts')}, faults {faults}"
    )
    print(f"{'variant':<12}{'median ms':>11}{'mean ms':>9}{'min ms':>8}")
    for variant, values in times.items():
        print(
            f"{variant:<12}{1000 * statistics.median(values):>11.2f}{1000 * statistics.fmean(values):>9.2f}"
            f"{1000 * min(values):>8.2f}"
        )
    extra_ms = 1000 * statistics.median(s - i for s, i in zip(times["sandboxed"], times["in-process"]))
    print(
        f"median per-round difference: {extra_ms:.2f} ms; round trip of the same batch to a function that does "
        f"nothing: {1000 * statistics.median(round_trips):.2f} ms"
    )
    print(
        f"fresh worker start (median of {args.starts}): {1000 * start_trivial:.0f} ms for a trivial source, "
        f"{1000 * start_math:.0f} ms for this one (it imports math-verify)"
    )
    print(f"pipe_roundtrip_ms={1000 * statistics.median(pipe_trips):.3f}")
    print(f"sandbox_roundtrip_ms={1000 * statistics.median(length_trips):.3f}")
    print(f"sandbox_overhead_ratio={statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
