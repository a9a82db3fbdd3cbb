"""What partitioning the rollouts table by run buys on PostgreSQL (runs.partitions): a search within one run, and
deleting a run, with the run's rows in a partition of its own against the same rows in one table beside other runs'.

    python -m bench.partitions [--runs 6] [--rows 10000] [--samples 10] [--database-url postgres://.../grpo_bench_partitions]

Both layouts in one database, side by side: ``--runs`` runs of ``--rows`` realistic completions each (bench.search's
text: R1-like lengths, a rare word planted in a few dozen rows of each run), loaded twice with the same rows: once
each run into its own partition (as the ingest stores a run), once every run into the default partition, one table
with one set of indexes for all of them (the table as it was before migration 0045, and as a run whose partition was
never made). Timed, ``--samples`` times each, in alternation: the rollout browser's first page
(``runs.rollouts.filters.rollout_page``) searched for the rare word, for a common word and for a prompt phrase, in the
middle run of each layout; then one run of each layout deleted as a user deletes it (``run_delete``: its partition
emptied and dropped; the other, a DELETE of its rows).

Last line: ``partition_rare_word_p95_ms=<p95 of the rare word, own partitions> table_rare_word_p95_ms=<the same, one
table> partition_search_p95_ms=<worst p95, own partitions> table_search_p95_ms=<worst p95, one table>
partition_delete_s=<delete, own partition> table_delete_s=<delete, one table> partition_freed_mb=<disk given back
at once by a delete, own partition> table_freed_mb=<the same, one table: a DELETE leaves dead rows to VACUUM>``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from bench import pgdb
from bench.registry import parse_args
from bench.search import COMMON_WORD, PROMPT_PHRASE, RARE_WORD, copy_escape, percentile, rows

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/grpo_bench_partitions"
COLUMNS = (
    'run_id, step, "index", "group", prompt, prompt_key, completion, rewards, reward, reward_bucket, advantage, '
    "length, truncated, zero_std, reflections, reflective, reflection_mask, columns"
)


def load(runs: int, n: int) -> tuple[list, list]:
    """The runs of each layout: (partitioned, in one table)."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from runs.models import Dataset, DatasetVersion, Run
    from runs.partitions import ensure_partition, has_partition

    user = get_user_model().objects.create(username="bench")
    dataset = Dataset.objects.create(owner=user, name="bench")
    version = DatasetVersion.objects.create(dataset=dataset, number=1, path="", row_count=0)
    layouts: dict[str, list] = {"partition": [], "table": []}
    raw = connection.connection
    start = time.perf_counter()
    for r in range(runs):
        for layout in layouts:
            run = Run.objects.create(
                owner=user,
                name=f"{layout} {r}",
                model="tiny",
                dataset_version=version,
                rewards=[{"name": "accuracy", "weight": 1.0}],
                config={"num_generations": 8, "scale_rewards": "group"},
                status=Run.Status.COMPLETED,
            )
            if layout == "partition":
                assert ensure_partition(run.pk)
            with raw.transaction(), raw.cursor().copy(f"COPY runs_rollout ({COLUMNS}) FROM STDIN") as cp:
                for step, index, group, prompt, key, text, adv in rows(run.pk, n, seed=r):
                    cp.write(
                        f"{run.pk}\t{step}\t{index}\t{group}\t{copy_escape(prompt)}\t{key}\t{copy_escape(text)}"
                        f"\t[1.0]\t1.0\t3\t{adv!r}\t{len(text) // 4}\tf\tf\t[]\tf\t0\t{{}}\n"
                    )
            assert has_partition(run.pk) == (layout == "partition")
            layouts[layout].append(run)
        print(f"run {r + 1} of {runs}: {2 * (r + 1) * n:,} rows in {time.perf_counter() - start:.0f} s", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE runs_rollout")
    return layouts["partition"], layouts["table"]


def searches(partitioned: list, table: list, samples: int) -> dict[str, dict[str, list[float]]]:
    from runs.rollouts.filters import rollout_page

    queries = {"rare word": {"phrase": RARE_WORD}, "common word": {"phrase": COMMON_WORD}}
    queries["prompt phrase"] = {"q": f'"{PROMPT_PHRASE}"'}
    runs = {"partition": partitioned[len(partitioned) // 2], "table": table[len(table) // 2]}
    times: dict[str, dict[str, list[float]]] = {layout: {q: [] for q in queries} for layout in runs}
    found: dict[str, dict[str, list]] = {layout: {} for layout in runs}
    for i in range(samples + 2):  # the first two warm the caches
        for label, data in queries.items():
            order = list(runs.items()) if i % 2 == 0 else list(runs.items())[::-1]
            for layout, run in order:
                t = time.perf_counter()
                page = rollout_page(run, {**data, "sort": "adv_desc"})
                ms = (time.perf_counter() - t) * 1000
                assert page.rows, f"{layout}, {label}: nothing found"
                found[layout][label] = [(r["step"], r["index"]) for r in page.rows]
                if i >= 2:
                    times[layout][label].append(ms)
    # the same rows in both layouts: the same pages
    assert found["partition"] == found["table"], "the two layouts found different rollouts"
    return times


def delete(run) -> tuple[float, float]:
    """(seconds, MB of disk given back at once) of deleting ``run`` as its owner does."""
    from django.db import connection

    from runs.deletion.services import run_delete
    from runs.partitions import table_bytes

    with connection.cursor() as cursor:
        before = table_bytes(cursor)
    t = time.perf_counter()
    run_delete(run=run, user=run.owner)
    seconds = time.perf_counter() - t
    with connection.cursor() as cursor:
        freed = before - table_bytes(cursor)
    return seconds, freed / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--rows", type=int, default=10_000, help="completions a run")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_PARTITIONS_DATABASE_URL", DEFAULT_URL))
    args = parse_args(parser, argv, runs=3, rows=400, samples=3)  # 400: the rare word in 40 rows a run

    data_dir = tempfile.mkdtemp(prefix="bench-partitions-")
    pgdb.create(args.database_url)
    os.environ.update(
        {"DJANGO_SETTINGS_MODULE": "grpo_web.settings", "GRPO_DATA_DIR": data_dir, "DATABASE_URL": args.database_url}
    )
    import django

    django.setup()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        partitioned, table = load(args.runs, args.rows)
        times = searches(partitioned, table, args.samples)
        worst = {}
        for layout, by_query in times.items():
            for label, values in by_query.items():
                print(
                    f"{layout:9s} {label:14s} p50 {percentile(values, 0.5):8.1f} ms   "
                    f"p95 {percentile(values, 0.95):8.1f} ms",
                    flush=True,
                )
            worst[layout] = max(percentile(v, 0.95) for v in by_query.values())
        # delete the first run of each layout, the partitioned one first and then the other, and the reverse with the
        # second runs, so neither always goes first
        deletes: dict[str, list[tuple[float, float]]] = {"partition": [], "table": []}
        for i in range(min(2, args.runs - 1)):
            order = ["partition", "table"] if i % 2 == 0 else ["table", "partition"]
            for layout in order:
                run = (partitioned if layout == "partition" else table)[0 if i == 0 else -1]
                deletes[layout].append(delete(run))
        for layout, values in deletes.items():
            print(
                f"{layout:9s} delete of a run of {args.rows:,} rows: "
                + ", ".join(f"{s:.2f} s, {mb:,.1f} MB of disk given back at once" for s, mb in values)
            )
        rare = {layout: percentile(by_query["rare word"], 0.95) for layout, by_query in times.items()}
        print(
            f"partition_rare_word_p95_ms={rare['partition']:.1f} table_rare_word_p95_ms={rare['table']:.1f} "
            f"partition_search_p95_ms={worst['partition']:.1f} table_search_p95_ms={worst['table']:.1f} "
            f"partition_delete_s={max(s for s, _ in deletes['partition']):.3f} "
            f"table_delete_s={max(s for s, _ in deletes['table']):.3f} "
            f"partition_freed_mb={min(mb for _, mb in deletes['partition']):.1f} "
            f"table_freed_mb={min(mb for _, mb in deletes['table']):.1f}"
        )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        pgdb.drop(args.database_url)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
