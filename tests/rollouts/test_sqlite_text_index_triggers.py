"""SQLite keeps its text index (FTS5 trigrams) in triggers, which a schema change can drop: the index is checked and
rebuilt when migrations run (runs.textindex.ensure_sqlite_index). SQLite's alone: .ci/run runs it in the lane on the
embedded default, and it is skipped where the database is PostgreSQL (whose index is a GIN index, no triggers)."""

import random

import pytest
from django.db import connection

from runs.models import Rollout
from runs.textindex import ensure_sqlite_index
from tests.rollouts.inspect_data import make_run
from tests.rollouts.test_indexed_search import found_completions, make_rows

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite keeps its text index in triggers"),
]


@pytest.fixture
def run(owner, dataset_version):
    return make_run(owner, dataset_version, name="literal")


def test_a_schema_change_that_drops_the_triggers_gets_them_back(run):
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER runs_rollout_fts_insert")
    Rollout.objects.bulk_create(make_rows(run, 4, random.Random(4)))  # rows the index never saw
    assert ensure_sqlite_index(connection) is True
    marked = Rollout.objects.filter(run=run).order_by("index").first()
    assert found_completions(run, phrase=marked.completion[5:40]) >= {marked.completion}
    Rollout.objects.bulk_create(make_rows(run, 1, random.Random(5), start=100))
    assert ensure_sqlite_index(connection) is False
