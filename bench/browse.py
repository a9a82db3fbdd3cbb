"""How fast does the rollout browser answer on a run with ten million completions in PostgreSQL?

    python -m bench.browse [--rows 10000000] [--lengths short|realistic] [--samples 60] [--keep]
                           [--database-url postgres://.../grpo_bench_browse]

The run: ``--rows`` completions, 1024 a step (G=8, so 128 groups a step, ~9,800 steps for 10M), prompts drawn
from a pool of 7,473 (GSM8K's size, so each comes back ~170 times), three reward functions, TRL's group advantages,
R1-style transcripts whose self-reflection phrases grow more common as steps pass: ``short`` ones (a few hundred
bytes, the default) or, with ``--lengths realistic``, of R1-like length (bench.synthetic: median about 12 KB, a tail
to 64 KB; ``--rows 200000`` is 2.5 GB of text). The rows are loaded with COPY
straight from a generator (secondary indexes built afterwards, as a restore would), then ANALYZEd; the schema is the
project's own (``migrate``). With ``--keep`` the database stays, and a later run with the same ``--rows`` reuses it.

Timed, each ``--samples`` times with random arguments, through the project's own reads (the selectors the
endpoints call, Python included, JSON encoding excluded):

- browse: a reward range and a self-reflection phrase (tagged at ingest), sorted by advantage, a page of 50, then
  the next page by its cursor (``runs.rollouts.filters.rollout_page``);
- step: one step's groups as its view loads them (the first 32 of 128), ranked, with mean, std, formula, highlight
  spans and the step's totals (``runs.rollouts.selectors.step_view``);
- prompt: one prompt's history, mean reward and solve rate per step (``runs.rollouts.inspection.prompt_history``).

The last line is ``browse_p95_ms=<the largest of the three p95s>``. Also timed and printed, but not in that figure:
"contains", the same page with free text the completion must contain instead of a phrase, through the text index
(migration 0038) and the browser's two tries (``runs.rollouts.filters.guarded``), stopped at 5 s; bench.search
measures text search on its own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from bench import pgdb
from bench.registry import parse_args

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/grpo_bench_browse"
BATCH, G, PROMPTS = 1024, 8, 7473
REFLECTION_PHRASES = ["wait", "let me check", "actually", "hmm", "let me verify", "let me reconsider"]
CONTAINS = ["let me check", "wait", "carry", "total", "bri"]  # free text, from about 1% of completions to most
REWARD_NAMES = ["accuracy", "think_format", "digit_ratio"]


def _copy_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class Rows:
    """COPY text lines of the synthetic run, one step at a time (numpy for the numbers, a pool for the texts)."""

    # the columns each line holds, in order; the rest (messages, step scores) are left NULL, as plain text rows
    # without per-step scores store them
    COLUMNS = (
        "run_id", "step", "index", "group", "prompt", "prompt_key", "completion", "rewards", "reward", "reward_bucket",
        "advantage", "length", "truncated", "zero_std", "reflections", "reflective", "reflection_mask", "columns",
    )  # fmt: skip

    def __init__(self, run_id: int, rows: int, seed: int = 0, lengths: str = "short"):
        from bench.synthetic import Generator
        from runs.phrases import DEFAULT_PHRASES
        from runs.rollouts.reflection import matcher, reflection_mask

        self.run_id, self.rows = run_id, rows
        self.steps = -(-rows // BATCH)
        self.rng = np.random.default_rng(seed)
        gen = Generator(seed=seed, prompts=PROMPTS, lengths=lengths)
        find = matcher(tuple(DEFAULT_PHRASES)).find
        self.prompts = [_copy_escape(gen.prompt(p)) for p in range(PROMPTS)]
        self.keys = [hashlib.sha256(gen.prompt(p).encode()).hexdigest()[:16] for p in range(PROMPTS)]
        self.answers = [json.dumps({"answer": str(sum(gen.problems[p]))}) for p in range(PROMPTS)]
        # a pool of transcripts, plain and reflective, with their tags and lengths
        self.pool = {}
        for reflective in (False, True):
            texts = []
            while len(texts) < (4000 if lengths == "short" else 1000):  # 1,000 long ones: 12 MB
                text, _, is_reflective = gen.completion(gen.rng.randrange(PROMPTS), 1 if not reflective else 10, 10)
                if is_reflective == reflective:
                    tags = find(text)
                    texts.append(
                        (
                            _copy_escape(text),
                            json.dumps(tags),
                            "t" if tags else "f",
                            max(1, len(text) // 4),
                            reflection_mask(tags, DEFAULT_PHRASES),
                        )
                    )
            self.pool[reflective] = texts

    def prompt_keys(self) -> list[str]:
        return self.keys

    def lines(self):
        from runs.models import reward_bucket

        rng, n = self.rng, 0
        for step in range(1, self.steps + 1):
            size = min(BATCH, self.rows - n)
            groups = size // G
            progress = step / self.steps
            prompts = rng.integers(0, PROMPTS, groups)
            reflective = rng.random(size) < 0.05 + 0.45 * progress
            correct = rng.random(size) < 0.2 + 0.6 * progress + 0.1 * reflective
            fmt = (rng.random(size) < 0.3 + 0.7 * progress).astype(float)
            digits = np.round(rng.random(size), 3)
            reward = correct * 1.0 + 0.5 * fmt + 0.5 * digits
            grouped = reward.reshape(groups, G)
            mean = grouped.mean(axis=1, keepdims=True)
            std = grouped.std(axis=1, ddof=1, keepdims=True)
            advantage = ((grouped - mean) / (std + 1e-4)).ravel()
            zero = np.repeat(std.ravel() <= 1e-8, G)
            truncated = rng.random(size) < 0.03
            picks = rng.integers(0, len(self.pool[False]), size)
            # plain Python values: numpy 2 writes np.float64(...) in f-strings' repr
            correct, fmt, digits, reward = correct.tolist(), fmt.tolist(), digits.tolist(), reward.tolist()
            buckets = [reward_bucket(r) for r in reward]
            advantage, zero, truncated = advantage.tolist(), zero.tolist(), truncated.tolist()
            reflective, picks, prompts = reflective.tolist(), picks.tolist(), prompts.tolist()
            out = []
            for i in range(size):
                p = prompts[i // G]
                text, tags, is_tagged, length, mask = self.pool[bool(reflective[i])][picks[i]]
                out.append(
                    f"{self.run_id}\t{step}\t{i}\t{i // G}\t{self.prompts[p]}\t{self.keys[p]}\t{text}\t"
                    f"[{float(correct[i])}, {fmt[i]}, {digits[i]}]\t{reward[i]!r}\t{buckets[i]}\t"
                    f"{advantage[i]!r}\t{length}\t"
                    f"{'t' if truncated[i] else 'f'}\t{'t' if zero[i] else 'f'}\t{tags}\t{is_tagged}\t"
                    f"{mask}\t{self.answers[p]}\n"
                )
            n += size
            yield "".join(out).encode()


def load(args) -> None:
    """Create the database and the run's rows, unless a kept one already holds them."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from runs.models import Dataset, DatasetVersion, Rollout, Run
    from runs.partitions import ensure_partition, table_bytes

    if Run.objects.filter(name="browse bench").exists():
        run = Run.objects.get(name="browse bench")
        count = run.config.get("bench_rows")
        if count == args.rows and run.config.get("bench_lengths", "short") == args.lengths:
            print(f"reusing the kept database: {count:,} completions", flush=True)
            return
    call_command("flush", interactive=False, verbosity=0)
    user = get_user_model().objects.create(username="bench")
    dataset = Dataset.objects.create(owner=user, name="bench")
    version = DatasetVersion.objects.create(dataset=dataset, number=1, path="", row_count=0)
    run = Run.objects.create(
        owner=user,
        name="browse bench",
        model="tiny",
        dataset_version=version,
        rewards=[{"name": name, "weight": w} for name, w in zip(REWARD_NAMES, [1, 0.5, 0.5])],
        config={
            "num_generations": G,
            "scale_rewards": "group",
            "bench_rows": args.rows,
            "bench_lengths": args.lengths,
        },
        status=Run.Status.COMPLETED,
    )
    table = Rollout._meta.db_table
    columns = ", ".join(connection.ops.quote_name(c) for c in Rows.COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s AND indexname NOT LIKE %s",
            [table, "%pkey"],
        )
        indexes = cursor.fetchall()
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass "
            "AND contype = 'u'",
            [table],
        )
        uniques = cursor.fetchall()
        for name, _ in uniques:
            cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
        for name, _ in indexes:
            if name not in {u for u, _ in uniques}:
                cursor.execute(f"DROP INDEX IF EXISTS {name}")
    rows = Rows(run.pk, args.rows, lengths=args.lengths)
    ensure_partition(run.pk)  # where the ingest puts a run's rows (runs.partitions)
    start = time.perf_counter()
    raw = connection.connection
    with raw.transaction(), raw.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as cp:
        for i, block in enumerate(rows.lines()):
            cp.write(block)
            if i % 1000 == 999:
                print(f"  {(i + 1) * BATCH:,} rows in {time.perf_counter() - start:.0f} s", flush=True)
    print(f"loaded {args.rows:,} rows in {time.perf_counter() - start:.0f} s; building indexes", flush=True)
    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        for name, definition in uniques:
            cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
        for name, definition in indexes:
            if name not in {u for u, _ in uniques}:
                # a partitioned table's index reads "ON ONLY" (its partitions' indexes attached one by one): made
                # again on the whole table
                cursor.execute(definition.replace(" ON ONLY ", " ON "))
        cursor.execute(f"VACUUM ANALYZE {table}")
        size = table_bytes(cursor)
    print(
        f"indexes and ANALYZE in {time.perf_counter() - start:.0f} s; the table takes {size / 1e6:,.0f} MB", flush=True
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def measure(args) -> dict[str, list[float]]:
    from runs.models import Rollout, Run
    from runs.rollouts.filters import SearchTooSlow, rollout_page
    from runs.rollouts.inspection import prompt_history
    from runs.rollouts.selectors import STEP_GROUPS_PAGE, step_view

    run = Run.objects.get(name="browse bench")
    steps = -(-args.rows // BATCH)
    rng = random.Random(1)
    # prompts the run sampled: the first group's of random steps
    keys = [
        Rollout.objects.filter(run=run, step=rng.randint(1, steps), index=0).values_list("prompt_key", flat=True).get()
        for _ in range(args.samples + 3)
    ]
    times: dict[str, list[float]] = {"browse": [], "browse_next": [], "step": [], "prompt": [], "contains": []}
    found = contained = timeouts = 0

    def timed(f):
        t = time.perf_counter()
        result = f()
        return result, (time.perf_counter() - t) * 1000

    for i in range(args.samples + 3):  # the first three warm the caches and are not counted
        low = rng.choice([0.0, 0.5, 1.0])
        ranges = {"reward_min": low, "reward_max": low + rng.choice([0.5, 1.0])}
        data = {**ranges, "reflection": rng.choice(REFLECTION_PHRASES), "sort": "adv_desc"}
        page, t_browse = timed(lambda: rollout_page(run, data))
        _, t_next = timed(lambda: rollout_page(run, {**data, "after": page.next_cursor}) if page.next_cursor else None)
        view, t_step = timed(lambda: step_view(run, rng.randint(1, steps)))
        groups = view["groups"]
        history, t_prompt = timed(lambda: prompt_history(run, keys[i]))
        text = {**ranges, "phrase": rng.choice(CONTAINS), "sort": "adv_desc"}
        try:
            hits, t_contains = timed(lambda: rollout_page(run, text))
        except SearchTooSlow:
            hits, t_contains = None, 5000.0
        assert len(groups) == STEP_GROUPS_PAGE and view["groups_total"] == BATCH // G and history is not None
        if i >= 3:
            for label, value in (
                ("browse", t_browse),
                ("browse_next", t_next),
                ("step", t_step),
                ("prompt", t_prompt),
                ("contains", t_contains),
            ):
                times[label].append(value)
            found += len(page.rows)
            contained += len(hits.rows) if hits else 0
            timeouts += hits is None
    print(
        f"pages held {found / args.samples:.1f} rows on average (reflection phrase), "
        f"{contained / args.samples:.1f} (contains text; {timeouts} stopped at the 5 s limit)",
        flush=True,
    )
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--lengths", choices=["short", "realistic"], default="short", help="bench.synthetic's lengths")
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_BROWSE_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--keep", action="store_true", help="keep the database (a later run reuses it)")
    args = parse_args(parser, argv, rows=20 * BATCH, samples=5)

    pgdb.create(args.database_url, fresh=False)
    data_dir = tempfile.mkdtemp(prefix="bench-browse-")
    os.environ.update(
        DATABASE_URL=args.database_url, DJANGO_SETTINGS_MODULE="grpo_web.settings", GRPO_DATA_DIR=data_dir
    )
    import django

    django.setup()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        load(args)
        times = measure(args)
        from runs.models import Rollout

        count = Rollout.objects.count()
        print(f"{count:,} {args.lengths} completions of one run in PostgreSQL; {args.samples} samples of each query")
        for label, values in times.items():
            print(
                f"  {label:12s} p50 {statistics.median(values):7.1f} ms   p95 {percentile(values, 0.95):7.1f} ms"
                + ("   (free text: not in the figure below)" if label == "contains" else "")
            )
        worst = max(percentile(v, 0.95) for k, v in times.items() if k != "contains")
        print(f"browse_p95_ms={worst:.1f}")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        if not args.keep:
            pgdb.drop(args.database_url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
