"""How fast does a reward replay re-score stored completions? The replay task's own scorer (``workers.replay.
ReplayScorer``: the replayed functions called the way TRL calls them, one step per call) and its arithmetic
(``runs.rollouts.replay.replay_step``: weighted totals, TRL's advantages, ranks, zero-variance shares), on synthetic
arithmetic steps scored by the built-in math-verify ``accuracy`` reward (plus ``think_format``), one process: a fifth
of the groups answer with a fraction (LaTeX or a/b), the rest with an integer, few answers repeating across groups.
The built-in compares integers and fractions of integers exactly, which is math-verify's verdict too, without its
parser; an answer only the parser reads (\\sqrt{2}, 0.5) costs about 6 ms a distinct string.

    python -m bench.replay [--steps 20] [--groups 64] [--generations 8] [--processes 1]

With ``--processes N`` the steps are split over N processes (as N sandbox-queue workers would take N replays); the
database writes are not timed (``bench/ingest.py`` measures bulk inserts of this size). The last line is
``replay_rows_per_s=<completions re-scored per second>``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry import parse_args  # noqa: E402 (after the path is set)

FRACTION_SHARE = 0.2  # groups whose answer is a fraction (the rest: integer sums, compared without the parser)
REWARDS = [
    {"name": "accuracy", "weight": 1.0, "version_id": None, "builtin": "accuracy"},
    {"name": "think_format", "weight": 0.5, "version_id": None, "builtin": "think_format"},
]


def synthetic_step(rng: random.Random, groups: int, G: int) -> list[dict]:
    rows = []
    for g in range(groups):
        a, b = rng.randint(1, 99_999), rng.randint(1, 99_999)  # few repeats across groups: little help from caching
        fraction = rng.random() < FRACTION_SHARE  # a fraction answer: math-verify's LaTeX parser does the work
        answer = f"{a}/{b}" if fraction else str(a + b)
        for i in range(G):
            if fraction:
                guess = rng.choice([f"\\frac{{{a}}}{{{b}}}", f"{a}/{b}", f"\\frac{{{b}}}{{{a}}}", f"{a + 1}/{b}"])
            else:
                guess = str(a + b + rng.choice([0, 0, 1, -1, 10]))
            text = (
                f"<think>{a} and {b}: work it out.</think> The answer is \\boxed{{{guess}}}"
                if rng.random() < 0.7
                else f"I think it is {guess}"
            )
            rows.append(
                {
                    "id": len(rows),
                    "index": len(rows),
                    "group": g,
                    "prompt": f"What is {a} + {b}?",
                    "completion": text,
                    "columns": {"answer": answer},
                    "rewards": [0.0, 0.0],
                    "reward": 0.0,
                    "advantage": 0.0,
                    "zero_std": False,
                }
            )
    return rows


def work(args: tuple[int, int, int, int]) -> tuple[int, float]:
    seed, steps, groups, G = args
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "grpo_web.settings")
    import django

    django.setup()
    from runs.rollouts.replay import replay_step
    from workers.replay import ReplayScorer

    rng = random.Random(seed)
    batches = [synthetic_step(rng, groups, G) for _ in range(steps)]
    scorer = ReplayScorer(REWARDS, slot_base=2000, allow_weak=True)
    scorer(batches[0][:G], REWARDS)  # warm up: math-verify's first parse builds its grammars
    weights = [r["weight"] for r in REWARDS]
    started = time.perf_counter()
    rows = 0
    for batch in batches:
        new = scorer(batch, REWARDS)
        replay_step(batch, new, weights, G, scale_rewards="group")
        rows += len(batch)
    return rows, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--groups", type=int, default=64)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--processes", type=int, default=1)
    args = parse_args(parser, None, steps=2, groups=16)
    per = max(1, args.steps // args.processes)
    jobs = [(seed, per, args.groups, args.generations) for seed in range(args.processes)]
    started = time.perf_counter()
    if args.processes == 1:
        results = [work(jobs[0])]
    else:
        with ProcessPoolExecutor(args.processes) as pool:
            results = list(pool.map(work, jobs))
    rows = sum(r for r, _ in results)
    busiest = max(s for _, s in results)
    print(f"rows={rows} processes={args.processes} scoring_s={busiest:.2f} wall_s={time.perf_counter() - started:.2f}")
    print(f"replay_rows_per_s={rows / busiest:.0f}")


if __name__ == "__main__":
    main()
