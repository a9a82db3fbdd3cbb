"""How fast does a review queue hand over its next rollout on a run of a million long, realistic completions?

    python -m bench.review [--rows 1000000] [--size 200] [--reviewers 3] [--keep]
                           [--database-url postgres://.../grpo_bench_search]

The run is bench.search's (``--rows`` completions of R1-like length, 512 a step; the same database, so ``--keep``
shares it with ``python -m bench.search --keep``). A review of ``--size`` rollouts sampled across steps is made over
the whole run (the time to make it is printed); then ``--reviewers`` reviewers take turns through it as the review
page does: mark the item done and take the next (``review_done`` + ``review_next``), then read it with its group
(``item_json``: the rollout in full, its labels, its group's previews), labeling a quarter of them. Beside it, side
by side, the rollout browser's first page of the same run (``rollout_page``), the page a reviewer would otherwise
read, and its first page filtered to the label given so far.

Last line: ``review_next_p95_ms=<p95 of taking and reading the next item>`` (goal: at most 100).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from bench import pgdb
from bench.registry import parse_args
from bench.search import DEFAULT_URL, RUN_NAME, load, percentile


def measure(size: int, reviewers: int) -> tuple[dict[str, list[float]], float]:
    from django.contrib.auth import get_user_model

    from runs.models import Label, Review, Run
    from runs.review.selectors import item_json
    from runs.review.services import review_create, review_done, review_next
    from runs.rollouts.filters import rollout_page
    from runs.rollouts.labels import labels_create

    run = Run.objects.get(name=RUN_NAME)
    Review.objects.filter(run=run).delete()
    Label.objects.filter(run=run).delete()
    users = [get_user_model().objects.get_or_create(username=f"reviewer{i}")[0] for i in range(reviewers)]
    start = time.perf_counter()
    review = review_create(run=run, user=users[0], data={}, mode="sample", size=size, seed=1)
    made_s = time.perf_counter() - start
    times: dict[str, list[float]] = {"next item": [], "browser page": [], "label filter": []}
    current = {u.pk: None for u in users}
    marked = 0  # rollouts labeled so far
    steps = set()
    for turn in range(size + len(users)):
        user = users[turn % len(users)]
        t = time.perf_counter()
        if current[user.pk] is not None:
            review_done(review=review, user=user, position=current[user.pk].position)
        item = review_next(review=review, user=user)
        shown = item_json(review, item, user) if item else None
        ms = (time.perf_counter() - t) * 1000
        current[user.pk] = item
        if shown is not None:
            assert shown["rollout"] and shown["group"], "an item without its rollout or group"
            steps.add(shown["rollout"]["step"])
            times["next item"].append(ms)
            if item.position % 4 == 0:  # the reviewer labels a quarter of them
                labels_create(run=run, user=user, items=[{"name": "reward hack", "rollout": shown["rollout"]["id"]}])
                marked += 1
        if turn % 10 == 0:
            t = time.perf_counter()
            assert rollout_page(run, {"sort": "adv_desc"}).rows
            times["browser page"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            labeled = rollout_page(run, {"sort": "adv_desc", "label": "reward hack"}).rows
            times["label filter"].append((time.perf_counter() - t) * 1000)
            assert len(labeled) == min(50, marked), "the label filter missed labeled rollouts"
    assert len(times["next item"]) == size, "some items were never handed over"
    print(f"review of {size} rollouts made in {made_s * 1000:.0f} ms; they come from {len(steps)} steps")
    return times, made_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--reviewers", type=int, default=3)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_SEARCH_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--keep", action="store_true", help="keep the database (bench.search reuses it too)")
    args = parse_args(parser, argv, rows=2_000, size=20)

    data_dir = tempfile.mkdtemp(prefix="bench-review-")
    pgdb.create(args.database_url, fresh=False)
    os.environ.update(
        {"DJANGO_SETTINGS_MODULE": "grpo_web.settings", "GRPO_DATA_DIR": data_dir, "DATABASE_URL": args.database_url}
    )
    import django

    django.setup()
    from django.core.management import call_command

    try:
        call_command("migrate", verbosity=0)
        load(args.rows)
        times, _ = measure(args.size, args.reviewers)
    finally:
        from django.db import connections

        connections.close_all()
        shutil.rmtree(data_dir, ignore_errors=True)
        if not args.keep:
            pgdb.drop(args.database_url)
    for label, values in times.items():
        print(f"{label:13s} p50 {statistics.median(values):8.1f} ms   p95 {percentile(values, 0.95):8.1f} ms")
    print(f"review_next_p95_ms={percentile(times['next item'], 0.95):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
