"""The rollouts table partitioned by run on PostgreSQL (issue 38, item 7; runs.partitions, migration 0045).

A run's rows are stored in a partition of its own by the real ingest; a search within the run reads only that
partition (the query plan says so); deleting the run empties and drops it; rows written before the partition was made
move into it. The migration, run both ways on rows already stored, leaves the browser's pages, its search and the
exports exactly as they were. Each test's DDL is rolled back with its transaction.

PostgreSQL only: SQLite (the embedded default) keeps one table, and the rest of the suite runs the same ingest,
browser and deletes on it."""

import importlib
import json
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.db import connection

from runs import partitions
from runs.deletion.services import run_delete
from runs.models import Rollout
from runs.rollouts.exports import jsonl_chunks
from runs.rollouts.filters import filtered, rollout_page
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db
postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="partitions are PostgreSQL's; SQLite keeps one table"
)
migration = importlib.import_module("runs.migrations.0045_rollout_partitions")


def _steps(run, word: str, steps=range(1, 4)):
    for step in steps:
        ingest(
            run,
            rollouts_event(
                step,
                [
                    (
                        f"What is {step}+{g}? ({run.name})",
                        [(f"{word} {step} {g} {k}: the answer is 4", [1.0 - k]) for k in range(2)],
                    )
                    for g in range(2)
                ],
            ),
        )


def _where(run) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM runs_rollout WHERE run_id = %s", [run.pk])
        return {row[0] for row in cursor.fetchall()}


def _without_ingest(run, completions: list[str]) -> None:
    """Rows stored by a path that makes no partition (the ORM): they land in the default partition."""
    Rollout.objects.bulk_create(
        Rollout(
            run=run,
            step=1,
            index=i,
            group=0,
            prompt="p",
            completion=text,
            rewards=[1.0],
            reward=1.0,
            advantage=i / 10,
            length=1,
        )
        for i, text in enumerate(completions)
    )


def _seen(run) -> dict:
    """What a user sees of the run: the browser's first page (ids in order), a search's page, a phrase's, and the
    JSONL export of a filter, byte for byte."""
    page = rollout_page(run, {})
    found = rollout_page(run, {"q": "zebra 2"})
    phrase = rollout_page(run, {"phrase": "ZEBRA 3 1"})
    return {
        "page": [r["id"] for r in page.rows],
        "search": [r["id"] for r in found.rows],
        "phrase": [r["id"] for r in phrase.rows],
        "export": b"".join(jsonl_chunks(run, {"step_min": 2})),
    }


@postgresql_only
def test_a_runs_rows_are_stored_in_its_own_partition(owner, dataset_version):
    first, second = make_run(owner, dataset_version, "first"), make_run(owner, dataset_version, "second")
    _steps(first, "zebra")
    _steps(second, "okapi")
    assert _where(first) == {f"runs_rollout_r{first.pk}"}
    assert _where(second) == {f"runs_rollout_r{second.pk}"}
    assert Rollout.objects.filter(run=first).count() == 12
    assert [r["completion"][:5] for r in rollout_page(first, {"q": "zebra"}).rows] == ["zebra"] * 12
    assert rollout_page(first, {"q": "okapi"}).rows == []


@postgresql_only
def test_a_search_in_one_run_reads_only_that_runs_partition(owner, dataset_version):
    first, second = make_run(owner, dataset_version, "first"), make_run(owner, dataset_version, "second")
    _steps(first, "zebra")
    _steps(second, "zebra")
    for data in ({"q": "zebra 2"}, {"phrase": "zebra 2"}, {"q": 'prompt "the answer" -okapi'}):
        sql, params = filtered(first, data).query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        assert f"runs_rollout_r{first.pk}" in plan, plan
        assert f"runs_rollout_r{second.pk}" not in plan, plan
        assert "runs_rollout_default" not in plan, plan
    found = [r["id"] for r in rollout_page(first, {"q": "zebra 2"}).rows]
    assert len(found) == 4
    assert set(Rollout.objects.filter(id__in=found).values_list("run_id", flat=True)) == {first.pk}


@postgresql_only
def test_rows_stored_before_the_partition_was_made_move_into_it(owner, dataset_version):
    run = make_run(owner, dataset_version, "early")
    _without_ingest(run, [f"c{i}" for i in range(5)])
    ids = sorted(Rollout.objects.filter(run=run).values_list("id", flat=True))
    assert _where(run) == {"runs_rollout_default"}
    assert partitions.ensure_partition(run.pk) is True
    assert _where(run) == {f"runs_rollout_r{run.pk}"}
    assert sorted(Rollout.objects.filter(run=run).values_list("id", flat=True)) == ids
    assert partitions.ensure_partition(run.pk) is True  # made once


@postgresql_only
def test_deleting_a_run_empties_and_drops_its_partition_and_keeps_the_others(owner, dataset_version):
    gone, kept = make_run(owner, dataset_version, "gone"), make_run(owner, dataset_version, "kept")
    _steps(gone, "zebra")
    _steps(kept, "okapi")
    run_delete(run=gone, user=owner)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass(%s), to_regclass(%s)", [f"runs_rollout_r{gone.pk}", f"runs_rollout_r{kept.pk}"]
        )
        assert cursor.fetchone() == (None, f"runs_rollout_r{kept.pk}")
    assert not Rollout.objects.filter(run_id=gone.pk).exists()
    assert Rollout.objects.filter(run=kept).count() == 12


@postgresql_only
def test_the_migration_both_ways_keeps_what_the_browser_search_and_exports_show(owner, dataset_version):
    """Rows of two runs (one in its partition, one in the default partition) through 0045 backwards (one plain
    table) and forwards again (the old rows now in the legacy partition): every page, search and export the same."""
    editor = SimpleNamespace(connection=connection)
    first, second = make_run(owner, dataset_version, "first"), make_run(owner, dataset_version, "second")
    _steps(first, "zebra")
    _without_ingest(second, [f"zebra 2 {i}" for i in range(4)])
    before = {run.pk: _seen(run) for run in (first, second)}
    assert before[first.pk]["search"] and before[first.pk]["phrase"] and before[first.pk]["export"]
    assert len(before[second.pk]["search"]) == 4
    assert {json.loads(line)["step"] for line in before[first.pk]["export"].splitlines()} == {2, 3}

    migration.unpartition(django_apps, editor)
    with connection.cursor() as cursor:
        assert not partitions.is_partitioned(cursor)
    assert {run.pk: _seen(run) for run in (first, second)} == before

    migration.partition(django_apps, editor)
    assert _where(first) == _where(second) == {"runs_rollout_legacy"}
    assert {run.pk: _seen(run) for run in (first, second)} == before

    # a run made after: a partition of its own, ids going on from the old rows'
    third = make_run(owner, dataset_version, "third")
    _steps(third, "zebra", steps=[1])
    assert _where(third) == {f"runs_rollout_r{third.pk}"}
    largest_before = max(i for seen in before.values() for i in seen["page"])
    assert min(Rollout.objects.filter(run=third).values_list("id", flat=True)) > largest_before
    # the old rows still delete with their run (a DELETE in the legacy partition)
    run_delete(run=first, user=owner)
    assert not Rollout.objects.filter(run_id=first.pk).exists()
    assert _seen(second) == before[second.pk]


@postgresql_only
def test_a_reader_holding_the_default_partition_delays_no_ingest_and_the_rows_move_in_later(owner, dataset_version):
    """Attaching a partition locks the default partition; a reader holding it (a search across runs, another
    connection) makes the ingest wait at most LOCK_TIMEOUT_MS, then store the batch in the default partition, where
    the browser reads it as well; the next batch's attach moves those rows in."""
    import psycopg

    run = make_run(owner, dataset_version, "waited")
    settings = connection.settings_dict
    other = psycopg.connect(
        dbname=settings["NAME"], user=settings["USER"], host=settings["HOST"], port=settings["PORT"] or 5432
    )
    try:
        other.execute("LOCK TABLE runs_rollout_default IN ACCESS SHARE MODE")  # held until its transaction ends
        with connection.cursor() as cursor:  # should the ingest wait for the lock unbounded, this test fails, not hangs
            cursor.execute("SET LOCAL statement_timeout = 60000")
        _steps(run, "zebra", steps=[1])
        assert _where(run) == {"runs_rollout_default"}
        assert len(rollout_page(run, {"q": "zebra 1"}).rows) == 4
    finally:
        other.rollback()
        other.close()
    _steps(run, "zebra", steps=[2])
    assert _where(run) == {f"runs_rollout_r{run.pk}"}
    assert Rollout.objects.filter(run=run).count() == 8
    assert len(rollout_page(run, {"q": "zebra"}).rows) == 8


@postgresql_only
def test_an_attached_runs_batch_lands_in_its_own_partition(owner, dataset_version):
    """A client's batch (runs.attach.services.append_lines, the attach API's path) is stored in the run's own
    partition, as the supervisor's ingest stores a run trained here."""
    from runs.attach.services import append_lines

    run = make_run(owner, dataset_version, "attached", status="running")
    event = rollouts_event(1, [("What is 1+1?", [(f"zebra {k}: the answer is 2", [float(k)]) for k in range(2)])])
    append_lines(run=run, data=(json.dumps(event) + "\n").encode())
    assert _where(run) == {f"runs_rollout_r{run.pk}"}
    assert Rollout.objects.filter(run=run).count() == 2
