"""How fast do rollouts reach PostgreSQL? The project's ingest path against a raw COPY of the same rows.

    python -m bench.ingest [--rows 1000000] [--realistic-rows 50000] [--rounds 3]
                           [--database-url postgres://postgres@127.0.0.1:5432/grpo_bench_ingest]

Two event logs, side by side: ``--rows`` short synthetic completions (bench.synthetic: R1-style transcripts of a few
hundred bytes, three reward functions, TRL's group advantages, self-reflection phrases; 1024 completions a step, G=8)
and ``--realistic-rows`` of R1-like length (bench.synthetic's ``realistic``: median about 12 KB, a tail to 64 KB), the
text index on (migration 0038: pg_trgm GIN, kept at ingest). Each is written once. Then, alternating:

- "project": ``runs.rollouts.ingest.ingest_log`` reads the log from its start, as a supervisor does: parse the events, tag
  reflection phrases with the run's list, derive the prompt key and zero-variance flag, and store the rows (binary
  COPY, 32 MB of log a transaction) with the metrics, advancing the run's offset.
- "copy": the rows the project stored, dumped once with ``COPY ... TO`` and loaded back with ``COPY ... FROM STDIN``
  in one transaction: PostgreSQL's own floor for the same rows into the same table with the same indexes.

At realistic length a third, "bare": the same raw COPY with the two text indexes dropped (made again after it),
which says what the index itself costs: pg_trgm takes every trigram of 12 KB of text at insert.

The table is emptied and checkpointed before each measurement. The database is created (and dropped unless
``--keep``) here; it must not be one that others use. The last line is
``ingest_rows_per_s=<project median> copy_ratio=<copy seconds / project seconds, median of the rounds>
realistic_rows_per_s=<the same at realistic length> realistic_copy_ratio=<...>``; the line before it says
``realistic_bare_copy_rows_per_s=<...>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import pgdb
from bench.registry import parse_args

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/grpo_bench_ingest"


def write_log(path: Path, rows: int, lengths: str = "short") -> int:
    from bench.synthetic import rollout_events

    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for event in rollout_events(rows, lengths=lengths):
            fh.write(json.dumps(event) + "\n")
            n += len(event.get("rows", ()))
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="short completions")
    parser.add_argument("--realistic-rows", type=int, default=50_000, help="completions of R1-like length")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_INGEST_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parse_args(parser, argv, rows=5000, realistic_rows=200, rounds=1)

    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    os.environ.update(
        DATABASE_URL=args.database_url, GRPO_DATA_DIR=str(work / "data"), DJANGO_SETTINGS_MODULE="grpo_web.settings"
    )
    pgdb.create(args.database_url)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from runs.models import Dataset, DatasetVersion, Rollout, Run, StepMetric
    from runs.rollouts.ingest import ROLLOUT_COLUMNS, ingest_log

    try:
        call_command("migrate", verbosity=0)
        user = get_user_model().objects.create(username="bench")
        dataset = Dataset.objects.create(owner=user, name="bench")
        version = DatasetVersion.objects.create(dataset=dataset, number=1, path="", row_count=0)
        from bench.synthetic import REWARD_NAMES

        run = Run.objects.create(
            owner=user,
            name="bench",
            model="tiny",
            dataset_version=version,
            rewards=[{"name": name, "weight": 1.0} for name in REWARD_NAMES],
            config={"num_generations": 8, "scale_rewards": "group"},
        )
        table = Rollout._meta.db_table
        columns = ", ".join(connection.ops.quote_name(c) for c in ROLLOUT_COLUMNS)

        def measure(lengths: str, rows: int) -> tuple[float, float]:
            """(project rows a second, copy ratio) for ``rows`` completions of ``lengths``."""
            log, dump = work / f"events-{lengths}.jsonl", work / f"rows-{lengths}.copy"
            start = time.perf_counter()
            n = write_log(log, rows, lengths)
            print(
                f"{lengths}: event log of {n} completions, {log.stat().st_size / 1e6:.0f} MB, written in "
                f"{time.perf_counter() - start:.0f} s",
                flush=True,
            )

            def fresh():
                with connection.cursor() as cursor:
                    # the run's prompts too (RunPrompt): each ingest and each COPY stores them anew
                    cursor.execute(f"TRUNCATE {table}, {StepMetric._meta.db_table}, runs_runprompt")
                    cursor.execute("CHECKPOINT")

            def project() -> float:
                fresh()
                run.event_offset, run.step = 0, 0
                t = time.perf_counter()
                changed, _ = ingest_log(run, log)
                seconds = time.perf_counter() - t
                assert changed["rollouts"] == n, changed["rollouts"]
                return seconds

            def copy() -> float:
                fresh()
                raw = connection.connection  # psycopg's connection, outside Django's transaction handling
                t = time.perf_counter()
                with raw.transaction():
                    with raw.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as cp, open(dump, "rb") as fh:
                        while block := fh.read(1 << 20):
                            cp.write(block)
                return time.perf_counter() - t

            def bare() -> float:
                """The raw COPY without the text indexes: what they cost."""
                from runs.textindex import pg_drops, pg_indexes

                # a partitioned table's indexes are dropped and made without CONCURRENTLY (runs.partitions)
                with connection.cursor() as cursor:
                    for statement in pg_drops(concurrently=False):
                        cursor.execute(statement)
                try:
                    return copy()
                finally:
                    fresh()
                    with connection.cursor() as cursor:
                        for statement in pg_indexes(concurrently=False):  # on an empty table: at once
                            cursor.execute(statement)

            # the first project ingest stores the rows the raw COPY will load: exactly the same rows
            project()
            with connection.cursor() as cursor, open(dump, "wb") as fh:
                with cursor.cursor.copy(f"COPY (SELECT {columns} FROM {table}) TO STDOUT") as cp:
                    for block in cp:
                        fh.write(block)
            print(f"{lengths}: rows dumped for the raw COPY: {dump.stat().st_size / 1e6:.0f} MB", flush=True)

            times: dict[str, list[float]] = {"project": [], "copy": [], "bare": []}
            for i in range(args.rounds):
                order = [("project", project), ("copy", copy)] if i % 2 == 0 else [("copy", copy), ("project", project)]
                for variant, timed in order + ([("bare", bare)] if lengths == "realistic" else []):
                    seconds = timed()
                    times[variant].append(seconds)
                    print(
                        f"{lengths} round {i + 1} {variant:8s} {seconds:7.2f} s  {n / seconds:10,.0f} rows/s",
                        flush=True,
                    )
            ratios = [c / p for c, p in zip(times["copy"], times["project"])]
            project_median = statistics.median(times["project"])
            copy_median = statistics.median(times["copy"])
            print(
                f"{lengths}: project median {project_median:.2f} s ({n / project_median:,.0f} rows/s); raw COPY median "
                f"{copy_median:.2f} s ({n / copy_median:,.0f} rows/s); on {os.cpu_count()} CPUs",
                flush=True,
            )
            if times["bare"]:
                bare_median = statistics.median(times["bare"])
                print(
                    f"{lengths}: raw COPY without the text indexes median {bare_median:.2f} s "
                    f"({n / bare_median:,.0f} rows/s): the indexes take {100 * (1 - bare_median / copy_median):.0f}% "
                    "of the raw COPY's time",
                    flush=True,
                )
                print(f"realistic_bare_copy_rows_per_s={n / bare_median:.0f}", flush=True)
            log.unlink()
            dump.unlink()
            return n / project_median, statistics.median(ratios)

        short_rate, short_ratio = measure("short", args.rows)
        real_rate, real_ratio = measure("realistic", args.realistic_rows)
        print(
            f"ingest_rows_per_s={short_rate:.0f} copy_ratio={short_ratio:.2f} "
            f"realistic_rows_per_s={real_rate:.0f} realistic_copy_ratio={real_ratio:.2f}"
        )
    finally:
        if not args.keep:
            pgdb.drop(args.database_url)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
