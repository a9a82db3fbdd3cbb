"""Completions compressed on SQLite (issue 38, item 3; runs.models.fields.PackedTextField).

SQLite compresses nothing, so the embedded default kept a run's completions at their raw size. Now each is a zlib
blob in its column; every way a completion is read (the ORM, values(), the lookups, SQL functions, the text index, the
exports) sees the text, exactly, and rows stored as text before read and search as they did.

SQLite's alone (PostgreSQL compresses the column in TOAST): .ci/run runs it in the lane on the embedded default."""

import json
import random

import pytest
from django.db import connection

from runs.models import Rollout
from runs.rollouts.detectors_text import recent_texts
from runs.rollouts.exports import jsonl_chunks
from runs.rollouts.filters import rollout_page
from runs.text import stored_text
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's: PostgreSQL compresses the column itself"),
]
LONG = " ".join(random.Random(5).choice(["wait", "let", "me", "check", "the", "sum", "again"]) for _ in range(4000))
TEXTS = [
    "<think>" + LONG + "</think> The answer is \\boxed{42}",
    "naïve CAFÉ \x00 nul and \u2400 its escape, 17% of a_b",
    "",
]


def _column_types(run) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute('SELECT typeof(completion) FROM runs_rollout WHERE run_id = %s ORDER BY step, "index"', [run.pk])
        return [row[0] for row in cursor.fetchall()]


def test_a_stored_completion_is_packed_and_reads_back_exactly_every_way(owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [("What is 6*7?", [(text, [1.0 - i / 2]) for i, text in enumerate(TEXTS)])]))
    assert _column_types(run) == ["blob"] * 3
    with connection.cursor() as cursor:
        cursor.execute("SELECT sum(length(completion)) FROM runs_rollout WHERE run_id = %s", [run.pk])
        stored = cursor.fetchone()[0]
    assert stored < sum(len(t.encode()) for t in TEXTS) / 4  # LONG's few words compress well

    rows = Rollout.objects.filter(run=run).order_by("index")
    assert [r.completion for r in rows] == TEXTS
    assert list(rows.values_list("completion", flat=True)) == TEXTS
    exported = [json.loads(line)["completion"] for line in b"".join(jsonl_chunks(run, {})).splitlines()]
    assert sorted(exported) == sorted(TEXTS)
    # the ORM's lookups read the text
    assert rows.filter(completion__startswith="<think>" + LONG[:30]).count() == 1
    assert rows.filter(completion__endswith="\\boxed{42}").count() == 1
    assert rows.filter(completion__icontains="naïve CAF").count() == 1  # SQLite folds ASCII letters only
    assert rows.filter(completion=TEXTS[1]).count() == 1
    assert rows.filter(completion="").count() == 1
    # the text index and the browser's search
    assert [r["completion"] for r in rollout_page(run, {"phrase": "17% of a_b"}).rows] == [TEXTS[1]]
    assert [r["completion"] for r in rollout_page(run, {"phrase": "NAÏVE café"}).rows] == [TEXTS[1]]
    assert [r["completion"] for r in rollout_page(run, {"q": "boxed"}).rows] == [TEXTS[0]]
    assert [r["completion"] for r in rollout_page(run, {"phrase": "42"}).rows] == [TEXTS[0]]  # short: LIKE
    # SQL functions on the column (the text detectors cut each end in the database)
    ends = {row[0]: (row[4], row[5]) for row in recent_texts(run, [1])}
    by_id = dict(rows.values_list("id", "completion"))
    for pk, (opening, end) in ends.items():
        text = stored_text(by_id[pk])  # SQL reads the stored form, NUL escaped
        assert text.startswith(opening) and text.endswith(end)
    assert ends[rows[0].id][1].endswith("\\boxed{42}")


def test_an_edit_and_a_delete_keep_the_index_true(owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [("p", [("an okapi grazes", [1.0]), ("a zebra runs", [0.0])])]))
    first = Rollout.objects.get(run=run, index=0)
    Rollout.objects.filter(pk=first.pk).update(completion="an edited marmot")
    assert _column_types(run) == ["blob", "blob"]
    assert [r["completion"] for r in rollout_page(run, {"phrase": "marmot"}).rows] == ["an edited marmot"]
    assert rollout_page(run, {"phrase": "okapi"}).rows == []
    Rollout.objects.filter(pk=first.pk).delete()
    assert rollout_page(run, {"phrase": "marmot"}).rows == []
    assert [r["completion"] for r in rollout_page(run, {"phrase": "zebra"}).rows] == ["a zebra runs"]


def test_rows_stored_as_text_before_read_and_search_as_they_did(owner, dataset_version):
    run = make_run(owner, dataset_version)
    with connection.cursor() as cursor:  # as a database written before the column was packed holds them
        cursor.execute(
            """INSERT INTO runs_rollout (run_id, step, "index", "group", prompt, prompt_key, completion, rewards,
                reward, reward_bucket, advantage, length, truncated, zero_std, reflections, reflective,
                reflection_mask, columns)
            VALUES (%s, 1, 0, 0, 'p', 'k', 'an unpacked quokka', '[1.0]', 1.0, 3, 0.5, 4, 0, 0, '[]', 0, 0, '{}')""",
            [run.pk],
        )
    ingest(run, rollouts_event(2, [("p", [("a packed quokka", [1.0])])]))
    assert _column_types(run) == ["text", "blob"]
    found = rollout_page(run, {"phrase": "QUOKKA", "sort": "step_asc"}).rows
    assert [r["completion"] for r in found] == ["an unpacked quokka", "a packed quokka"]
    assert Rollout.objects.filter(run=run, completion__contains="unpacked").count() == 1
