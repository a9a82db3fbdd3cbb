"""A run's prompts stored once and searched once (issue 38, item 3; runs.models.RunPrompt, migration 0046).

A prompt repeats in every completion of its group and in every step that samples it again; the text index indexed
each copy. Now the database keeps one copy per (run, prompt), filled by its own trigger from every stored rollout
(the ingest's COPY, the ORM, a raw INSERT), and a prompt search reads that copy's index, then the run's rows by key.
What a user finds is the same rows as before, on both databases; the migration both ways keeps them.

Runs on the database the suite is given: the embedded default (SQLite) and PostgreSQL in CI."""

import importlib
import re
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.db import connection

from runs.deletion.services import run_delete
from runs.models import Rollout, RunPrompt
from runs.rollouts.filters import filtered, rollout_page, sorted_rows, text_search
from runs.rollouts.search import search_runs
from runs.text import prompt_key
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db
migration = importlib.import_module("runs.migrations.0046_run_prompts")
PROMPTS = ("What is 17% of 40_000? Show your work.", "Factor x^2 - 5x + 6.", "What is 17 percent of 400?")


def _store(run, steps=range(1, 4)):
    """Through the real ingest: each step samples every prompt again, two completions a prompt."""
    for step in steps:
        ingest(
            run,
            rollouts_event(
                step,
                [(prompt, [(f"step {step} try {k}: 6800", [1.0 - k]) for k in range(2)]) for prompt in PROMPTS],
            ),
        )


def _prompt_hits(run, text: str) -> list[tuple[int, int]]:
    qs = Rollout.objects.filter(run=run).filter(text_search(f'"{text}"', ("prompt",), runs=[run.pk]))
    return sorted(qs.values_list("step", "index"))


def _expected(run, text: str) -> list[tuple[int, int]]:
    """The rows whose prompt holds ``text``, any case, read row by row in Python: what a scan would find."""
    rows = Rollout.objects.filter(run=run).values_list("step", "index", "prompt")
    return sorted((s, i) for s, i, p in rows if text.lower() in p.lower())


def _plan(qs) -> str:
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {'QUERY PLAN ' if connection.vendor == 'sqlite' else ''}{sql}", params)
        return "\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall())


def test_each_prompt_of_a_run_is_stored_once_and_found_in_every_row_that_holds_it(owner, dataset_version):
    run, other = make_run(owner, dataset_version, "mine"), make_run(owner, dataset_version, "other")
    _store(run)
    _store(other, steps=[1])
    assert Rollout.objects.filter(run=run).count() == 18
    stored = sorted(RunPrompt.objects.filter(run=run).values_list("key", "text"))
    assert stored == sorted((prompt_key(p), p) for p in PROMPTS)
    assert RunPrompt.objects.filter(run=other).count() == 3  # the other run's copies are its own

    for text in ("17% of", "40_000", "FACTOR X^2", "17 percent", "what is 17", "show your work."):
        found = _prompt_hits(run, text)
        assert found == _expected(run, text) and found, text
    # LIKE's wildcards are text: "17% of" is not "17 percent of"
    assert {s_i[1] for s_i in _prompt_hits(run, "17% of")} == {0, 1}
    assert _prompt_hits(run, "no such prompt") == []
    # the browser's search reads prompts and completions alike, and keeps to the run
    page = rollout_page(run, {"q": '"factor x^2"', "sort": "step_asc"})
    assert [(r["step"], r["index"]) for r in page.rows] == _expected(run, "factor x^2")
    # across runs (the search page): both runs' rows, a prompt hit named as such
    hits = search_runs(owner, '"17 percent"', where="prompt").hits
    assert sorted((h.run_id, h.step, h.index) for h in hits) == sorted(
        [(run.pk, s, i) for s, i in _expected(run, "17 percent")] + [(other.pk, 1, 4), (other.pk, 1, 5)]
    )
    assert {h.where for h in hits} == {"prompt"}


def test_a_prompt_search_reads_the_prompts_index_not_every_rows_prompt(owner, dataset_version):
    run = make_run(owner, dataset_version)
    _store(run)
    plan = _plan(sorted_rows(filtered(run, {"q": '"factor x^2"'}), "step_asc").values_list("id", flat=True)[:51])
    if connection.vendor == "postgresql":
        # the run's prompts are read (through their trigram index, or by run where it has few), no rollout's prompt
        assert re.search(r"on runs_runprompt\b[^\n]*(\n [^\n]*)*text ~~\*", plan), plan
        assert not re.search(r"\(prompt(\)::text)? ~~\*", plan), plan
        with connection.cursor() as cursor:  # the rollouts keep no trigram index of their prompts
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'runs_rollout'")
            definitions = [row[0] for row in cursor.fetchall()]
        assert any("gin_trgm_ops" in d and "completion" in d for d in definitions), definitions
        assert not any("gin_trgm_ops" in d and "(prompt " in d for d in definitions), definitions
    else:
        assert "runs_runprompt_fts VIRTUAL TABLE INDEX" in plan, plan
        with connection.cursor() as cursor:  # the rollouts' FTS5 table indexes the completion alone
            cursor.execute("SELECT name FROM pragma_table_info('runs_rollout_fts')")
            assert [row[0] for row in cursor.fetchall()] == ["completion"]


def _unkeyed(run, step: int, index: int, prompt: str) -> Rollout:
    """A row as the ORM makes it, with no prompt key given."""
    fields = {"group": 0, "completion": f"{step}.{index}", "rewards": [1.0], "reward": 1.0, "advantage": 0.0}
    return Rollout(run=run, step=step, index=index, prompt=prompt, length=1, **fields)


def test_rows_stored_without_a_key_get_one_and_their_prompt(owner, dataset_version):
    run = make_run(owner, dataset_version)
    Rollout.objects.bulk_create(_unkeyed(run, 1, i, "Name a prime above 90") for i in range(3))
    _unkeyed(run, 2, 0, "Name a prime below 10").save()
    assert set(Rollout.objects.filter(run=run).values_list("prompt_key", flat=True)) == {
        prompt_key("Name a prime above 90"),
        prompt_key("Name a prime below 10"),
    }
    assert RunPrompt.objects.filter(run=run).count() == 2
    assert _prompt_hits(run, "prime above") == [(1, 0), (1, 1), (1, 2)]
    assert _prompt_hits(run, "PRIME BELOW") == [(2, 0)]


def test_deleting_a_run_deletes_its_prompts_and_no_other_runs(owner, dataset_version):
    run, other = make_run(owner, dataset_version, "gone"), make_run(owner, dataset_version, "kept")
    _store(run, steps=[1])
    _store(other, steps=[1])
    run_delete(run=run, user=owner)
    assert not RunPrompt.objects.filter(run_id=run.pk).exists()
    assert RunPrompt.objects.filter(run=other).count() == 3
    assert _prompt_hits(other, "factor") == _expected(other, "factor") != []


def test_the_migration_both_ways_finds_the_same_rows(owner, dataset_version):
    """Rows stored, 0046 backwards (each row's prompt indexed again) with the run's prompts emptied (as the table's
    drop would), then forwards: the prompts refilled from the rows, every search the
    same, and the trigger back for the rows stored after."""
    editor = SimpleNamespace(connection=connection)
    run = make_run(owner, dataset_version)
    _store(run, steps=[1, 2])
    texts = ("17% of", "factor", "WHAT IS", "step 2 try 1")
    seen = {t: [r["id"] for r in rollout_page(run, {"q": f'"{t}"', "sort": "step_asc"}).rows] for t in texts}
    assert all(seen.values())

    migration.backwards(django_apps, editor)
    with connection.cursor() as cursor:  # each row's prompt indexed again, as before 0046
        if connection.vendor == "postgresql":
            cursor.execute("SELECT to_regclass('rollout_prompt_trgm') IS NOT NULL")
            assert cursor.fetchone()[0]
        else:
            cursor.execute("SELECT name FROM pragma_table_info('runs_rollout_fts')")
            assert [row[0] for row in cursor.fetchall()] == ["prompt", "completion"]
    RunPrompt.objects.all().delete()

    migration.forwards(django_apps, editor)
    assert sorted(RunPrompt.objects.filter(run=run).values_list("text", flat=True)) == sorted(PROMPTS)
    assert {t: [r["id"] for r in rollout_page(run, {"q": f'"{t}"', "sort": "step_asc"}).rows] for t in texts} == seen
    _store(run, steps=[3])
    assert len(_prompt_hits(run, "factor")) == 6
