"""How fast does indexed text search answer on a run of long, realistic completions, on PostgreSQL and on SQLite, and
what does the store cost on disk against the raw text?

    python -m bench.search [--rows 1000000] [--samples 20] [--keep] [--database-url postgres://.../grpo_bench_search]
                           [--sqlite-path var/bench/search.sqlite3] [--only postgres|sqlite]

The run: ``--rows`` completions, 512 a step (G=8), R1-like lengths (``bench.synthetic.realistic_length``: a
lognormal around 3,000 tokens, about 12 KB, a tail to the 16,000-token cap, 64 KB), text from a Zipf vocabulary of
3,000 words, prompts from a pool of 7,473 (GSM8K's size). Planted: one completion holding a rare phrase, a rare word in
a few dozen. Each database is made with the project's own migrations (the text index included: pg_trgm on
PostgreSQL, FTS5 trigrams on SQLite) and filled in one transaction; with ``--keep`` it stays, and a later run with the
same ``--rows`` reuses it.

Timed, ``--samples`` times each, the rollout browser's first page (``runs.rollouts.filters.rollout_page``, sorted by
advantage, 50 rows) for: a common word (in most completions), the rare word, the rare phrase (present once), and a
prompt phrase (the search box, ``q``, reads prompts and completions); each must be found. Store: the bytes the
rollouts table and the runs' prompts take with their indexes (PostgreSQL: ``pg_total_relation_size``; SQLite: the
file) over the raw UTF-8 bytes of the rollouts' prompts and completions.

Each database runs in a process of its own (Django holds one default database); the last line is
``search_p95_ms=<the worst p95 of all> store_bytes_ratio=<the larger of the two>``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import pgdb
from bench.registry import parse_args

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/grpo_bench_search"
BATCH, G, PROMPTS = 512, 8, 7473
RARE_PHRASE = "a quokka recomputed the determinant"
RARE_WORD = "hypotenuse"
COMMON_WORD = "carry"
PROMPT_PHRASE = "step by step inside"
RUN_NAME = "search bench"


def copy_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def rows(run_id: int, n: int, seed: int = 0):
    """(step, index, group, prompt, prompt_key, completion, advantage) of the run, the planted texts included."""
    import hashlib

    from bench.synthetic import Generator

    texts = Generator(seed=seed, prompts=PROMPTS, lengths="realistic")
    rng = random.Random(seed + 1)
    steps = -(-n // BATCH)
    rare_every = max(1, n // 40)
    once = n // 2
    for i in range(n):
        step, index = 1 + i // BATCH, i % BATCH
        p = (i // G * 7919) % PROMPTS
        prompt = texts.prompt(p)
        text, _, _ = texts.completion(p, step, steps)
        if i == once:
            text = f"{text[: len(text) // 2]} {RARE_PHRASE} {text[len(text) // 2 :]}"
        elif i % rare_every == 7:
            text = f"{text} {RARE_WORD}"
        key = hashlib.sha256(prompt.encode()).hexdigest()[:16]
        yield step, index, index // G, prompt, key, text, rng.uniform(-2, 2)


def load(n: int) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction

    from runs.models import Dataset, DatasetVersion, Run
    from runs.partitions import ensure_partition

    kept = Run.objects.filter(name=RUN_NAME).first()
    if kept and kept.config.get("bench_rows") == n:
        print(f"reusing the kept database: {n:,} completions", flush=True)
        return
    call_command("flush", interactive=False, verbosity=0)
    user = get_user_model().objects.create(username="bench")
    dataset = Dataset.objects.create(owner=user, name="bench")
    version = DatasetVersion.objects.create(dataset=dataset, number=1, path="", row_count=0)
    run = Run.objects.create(
        owner=user,
        name=RUN_NAME,
        model="tiny",
        dataset_version=version,
        rewards=[{"name": "accuracy", "weight": 1.0}],
        config={"num_generations": G, "scale_rewards": "group", "bench_rows": n},
        status=Run.Status.COMPLETED,
    )
    raw_bytes = 0
    start = time.perf_counter()
    columns = (
        'run_id, step, "index", "group", prompt, prompt_key, completion, rewards, reward, reward_bucket, advantage, '
        "length, truncated, zero_std, reflections, reflective, reflection_mask, columns"
    )
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        raw = connection.connection
        ensure_partition(run.pk)  # where the ingest puts a run's rows (runs.partitions)
        with raw.transaction(), raw.cursor().copy(f"COPY runs_rollout ({columns}) FROM STDIN") as cp:
            block = []
            for step, index, group, prompt, key, text, adv in rows(run.pk, n):
                raw_bytes += len(prompt.encode()) + len(text.encode())
                block.append(
                    f"{run.pk}\t{step}\t{index}\t{group}\t{copy_escape(prompt)}\t{key}\t{copy_escape(text)}\t[1.0]"
                    f"\t1.0\t3\t{adv!r}\t{len(text) // 4}\tf\tf\t[]\tf\t0\t{{}}\n"
                )
                if len(block) == 256:
                    cp.write("".join(block))
                    block = []
            if block:
                cp.write("".join(block))
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE runs_rollout")
            cursor.execute("VACUUM ANALYZE runs_runprompt")
    else:
        from runs.textindex import packed_text  # as the ingest stores a completion on SQLite

        sql = f"INSERT INTO runs_rollout ({columns}) VALUES ({', '.join(['%s'] * 18)})"
        with transaction.atomic(), connection.cursor() as cursor:
            batch = []
            for step, index, group, prompt, key, text, adv in rows(run.pk, n):
                raw_bytes += len(prompt.encode()) + len(text.encode())
                batch.append(
                    (run.pk, step, index, group, prompt, key, packed_text(text), "[1.0]", 1.0, 3, adv, len(text) // 4)
                    + (False, False, "[]", False, 0, "{}")
                )
                if len(batch) == 500:
                    cursor.executemany(sql, batch)
                    batch = []
            if batch:
                cursor.executemany(sql, batch)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    run.config = {**run.config, "bench_raw_bytes": raw_bytes}
    run.save(update_fields=["config"])
    print(f"loaded {n:,} rows ({raw_bytes / 1e6:,.0f} MB of text) in {time.perf_counter() - start:.0f} s", flush=True)


def store_bytes() -> int:
    from django.conf import settings
    from django.db import connection

    from runs.partitions import table_bytes

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            # the rollouts and the runs' prompts (one copy a run and prompt, runs.models.RunPrompt), every index
            rollouts = table_bytes(cursor)
            cursor.execute("SELECT pg_total_relation_size('runs_runprompt')")
            return rollouts + int(cursor.fetchone()[0])
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Path(settings.DATABASES["default"]["NAME"]).stat().st_size


def measure(samples: int) -> dict[str, list[float]]:
    from runs.models import Run
    from runs.rollouts.filters import rollout_page

    run = Run.objects.get(name=RUN_NAME)
    queries = {
        "common word": {"phrase": COMMON_WORD},
        "rare word": {"phrase": RARE_WORD},
        "rare phrase": {"phrase": RARE_PHRASE.upper()},
        "prompt phrase": {"q": f'"{PROMPT_PHRASE}"'},
    }
    times: dict[str, list[float]] = {k: [] for k in queries}
    for i in range(samples + 2):  # the first two warm the caches
        for label, data in queries.items():
            t = time.perf_counter()
            page = rollout_page(run, {**data, "sort": "adv_desc"})
            ms = (time.perf_counter() - t) * 1000
            assert page.rows, f"{label}: nothing found"
            if label == "rare phrase":
                assert len(page.rows) == 1 and RARE_PHRASE in page.rows[0]["completion"], label
            if i >= 2:
                times[label].append(ms)
    return times


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def one(kind: str, args) -> dict:
    """In this process: the database of ``kind`` made, filled, measured; its figures as JSON on the last line."""
    data_dir = tempfile.mkdtemp(prefix="bench-search-")
    env = {"DJANGO_SETTINGS_MODULE": "grpo_web.settings", "GRPO_DATA_DIR": data_dir}
    if kind == "postgres":
        pgdb.create(args.database_url, fresh=False)
        env["DATABASE_URL"] = args.database_url
    else:
        Path(args.sqlite_path).parent.mkdir(parents=True, exist_ok=True)
        if not args.keep and Path(args.sqlite_path).exists():
            Path(args.sqlite_path).unlink()
        env["DATABASE_URL"] = f"sqlite:///{Path(args.sqlite_path).resolve()}"
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        load(args.rows)
        times = measure(args.samples)
        from runs.models import Run

        raw = Run.objects.get(name=RUN_NAME).config["bench_raw_bytes"]
        size = store_bytes()
        return {"times": times, "store": size, "raw": raw}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        if not args.keep:
            if kind == "postgres":
                pgdb.drop(args.database_url)
            else:
                Path(args.sqlite_path).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_SEARCH_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--sqlite-path", default="", help="the SQLite file (default: a new one in a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the databases (a later run reuses them)")
    parser.add_argument("--only", choices=["postgres", "sqlite"], help="one database, in this process")
    args = parse_args(parser, argv, rows=2_000, samples=3)

    if args.only:
        print(json.dumps(one(args.only, args)))
        return 0
    scratch = None
    if not args.sqlite_path:
        scratch = tempfile.mkdtemp(prefix="bench-search-sqlite-")
        args.sqlite_path = str(Path(scratch) / "search.sqlite3")
    results = {}
    for kind in ("postgres", "sqlite"):
        command = [sys.executable, "-m", "bench.search", "--only", kind, "--rows", str(args.rows)]
        command += ["--samples", str(args.samples), "--database-url", args.database_url]
        command += ["--sqlite-path", args.sqlite_path] + (["--keep"] if args.keep else [])
        done = subprocess.run(command, capture_output=True, text=True)
        if kind == "sqlite" and scratch and not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        if done.returncode:
            print(done.stdout + done.stderr, file=sys.stderr)
            return done.returncode
        print("\n".join(done.stdout.splitlines()[:-1]))
        results[kind] = json.loads(done.stdout.splitlines()[-1])
    worst, ratio = 0.0, 0.0
    for kind, result in results.items():
        store_ratio = result["store"] / max(1, result["raw"])
        ratio = max(ratio, store_ratio)
        print(f"{kind}: {args.rows:,} completions, {result['raw'] / 1e6:,.0f} MB of text, store {store_ratio:.2f}x")
        for label, values in result["times"].items():
            p95 = percentile(values, 0.95)
            worst = max(worst, p95)
            print(f"  {label:14s} p50 {statistics.median(values):8.1f} ms   p95 {p95:8.1f} ms")
    print(f"search_p95_ms={worst:.1f} store_bytes_ratio={ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
