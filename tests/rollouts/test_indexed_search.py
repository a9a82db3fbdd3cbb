"""Indexed text search (issue 38, item 2): a phrase present once among 100,000 rows is found, through the text index
(the query plan reads it: pg_trgm's GIN on PostgreSQL, the FTS5 trigram table on SQLite), by the browser's phrase and
search filters alike; the index follows rows deleted and changed; what a user types matches literally (LIKE's
wildcards, FTS5 and tsquery syntax, quotes, NUL) and never reaches a 500.

Runs on the database the suite is given: the embedded default (SQLite) and PostgreSQL in CI."""

import random
import re

import pytest
from django.db import connection

from runs.models import Rollout
from runs.rollouts.filters import filtered, rollout_page, sorted_rows
from runs.rollouts.search import search_runs
from tests.api.conftest import api_client
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db

VOCABULARY = (
    "the of and to a in is that for it as with was on be by this are or from at which but not have an they we his "
    "her one all been their has more if will would there so what about when can up out them some these other into "
    "than then its only new time two may first over such like our also after any most where through back even "
    "wait let me check again answer equals therefore hence compute sum product square root prime factor number"
).split()
NEEDLE = "a quokka recomputed the determinant"


def make_rows(run, n: int, rng: random.Random, *, needle_at: int | None = None, start: int = 0) -> list[Rollout]:
    rows = []
    for i in range(start, start + n):
        text = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(8, 16)))
        if i == needle_at:
            text = f"{text} {NEEDLE.upper()} {text}"
        rows.append(
            Rollout(
                run=run,
                step=1 + i // 512,
                index=i % 512,
                group=(i % 512) // 8,
                prompt=f"Prompt {i // 8}: compute {i // 8} squared",
                prompt_key=f"{i // 8:016x}",
                completion=text,
                rewards=[1.0],
                reward=1.0,
                reward_bucket=3,
                advantage=rng.uniform(-1, 1),
                length=len(text) // 4,
            )
        )
    return rows


def _plan(qs) -> str:
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {'QUERY PLAN ' if connection.vendor == 'sqlite' else ''}{sql}", params)
        return "\n".join(" ".join(str(c) for c in row) for row in cursor.fetchall())


def _insert_many(run, n: int, needle_at: int) -> None:
    """``n`` rows made by the database itself (a Python loop of 100,000 model objects costs minutes on a loaded CI
    machine): each completion a sentence of words picked by its row number, one holding NEEDLE."""
    words = ",".join(f"'{w}'" for w in VOCABULARY)
    pick = "(ARRAY[{w}])[1 + (i * {k}) % {n}]" if connection.vendor == "postgresql" else None
    if connection.vendor == "postgresql":
        sentence = " || ' ' || ".join(pick.format(w=words, k=k, n=len(VOCABULARY)) for k in (7, 13, 31, 61, 97, 127))
        rows = f"SELECT i FROM generate_series(0, {n - 1}) AS i"
        text = f"CASE WHEN i = {needle_at} THEN {sentence} || ' {NEEDLE.upper()}' ELSE {sentence} END"
        number = "to_char(i / 8, 'FM0000000000000000')"
        advantage = "((i * 7919) % 2001 - 1000) / 1000.0"
    else:
        vocab = " ".join(VOCABULARY)
        # the k-th word of the row: a slice of the vocabulary at a place the row number picks
        sentence = " || ' ' || ".join(f"substr('{vocab}', 1 + (i * {k}) % {len(vocab) - 12}, 12)" for k in (7, 13, 31))
        rows = (
            f"WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {n - 1}) SELECT i FROM seq"
        )
        text = f"CASE WHEN i = {needle_at} THEN {sentence} || ' {NEEDLE.upper()}' ELSE {sentence} END"
        number = "printf('%016x', i / 8)"
        advantage = "((i * 7919) % 2001 - 1000) / 1000.0"
    sql = f"""
        INSERT INTO runs_rollout (run_id, step, "index", "group", prompt, prompt_key, completion, rewards, reward,
            reward_bucket, advantage, length, truncated, zero_std, reflections, reflective, reflection_mask, columns)
        SELECT {run.pk}, 1 + i / 512, i % 512, (i % 512) / 8, 'Prompt ' || (i / 8) || ': compute it', {number},
            {text}, '[1.0]', 1.0, 3, {advantage}, 20, false, false, '[]', false, 0, '{{}}'
        FROM ({rows}) AS numbers
    """
    with connection.cursor() as cursor:
        cursor.execute(sql)
        if connection.vendor == "postgresql":
            cursor.execute("ANALYZE runs_rollout")


@pytest.fixture
def big_run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="big")
    _insert_many(run, 100_000, needle_at=73_421)
    assert Rollout.objects.filter(run=run).count() == 100_000
    return run


def test_a_phrase_present_once_among_100000_rows_is_found_through_the_index(big_run):
    needle = NEEDLE.replace("quokka", "QuOkKa")  # any case
    for data in ({"phrase": needle}, {"q": f'"{needle}"'}, {"q": "quokka determinant"}, {"phrase": "okka rec"}):
        page = rollout_page(big_run, {**data, "sort": "adv_desc"})
        assert [(r["step"], r["index"]) for r in page.rows] == [(1 + 73_421 // 512, 73_421 % 512)], data
        assert page.next_cursor == ""
    plan = _plan(sorted_rows(filtered(big_run, {"phrase": needle}), "step_asc").values_list("id", flat=True)[:51])
    if connection.vendor == "postgresql":
        # the trigram index on the completions: the table's own, or a partition's copy of it (runs.partitions)
        assert re.search(r"Bitmap Index Scan on (rollout_completion_trgm|runs_rollout_\w+_completion_idx)", plan), plan
    else:
        assert "runs_rollout_fts VIRTUAL TABLE INDEX" in plan, plan
    # a common word's first page comes in the browser's order, every row holding it
    page = rollout_page(big_run, {"phrase": "therefore", "sort": "adv_desc"})
    assert len(page.rows) == 50 and page.next_cursor
    assert all("therefore" in r["completion"].lower() for r in page.rows)
    assert [r["advantage"] for r in page.rows] == sorted((r["advantage"] for r in page.rows), reverse=True)


@pytest.fixture
def run(owner, dataset_version):
    return make_run(owner, dataset_version, name="literal")


LITERAL = [
    "100% sure",
    "100 percent sure",
    "a_b",
    "axb",
    r"back\slash",
    'say "hi" there',
    "NEAR(alpha beta)",
    "alpha beta",
    "x AND y OR z",
    "col: value",
    "fat & rat | !cat:*",
    "star*",
    "nul\x00byte",
    "Wait, let me reconsider",
    "naïve café",
]


def found_completions(run, **data) -> set[str]:
    return {r["completion"] for r in rollout_page(run, {"sort": "step_asc", **data}, size=100).rows}


def test_what_a_user_types_matches_literally(run):
    rng = random.Random(1)
    rows = make_rows(run, len(LITERAL), rng)
    for row, text in zip(rows, LITERAL, strict=True):
        row.completion = text
    Rollout.objects.bulk_create(rows)
    assert found_completions(run, phrase="100%") == {"100% sure"}
    assert found_completions(run, phrase="a_b") == {"a_b"}
    assert found_completions(run, phrase="k\\s") == {r"back\slash"}
    assert found_completions(run, phrase='"hi"') == {'say "hi" there'}
    assert found_completions(run, phrase="NEAR(alpha") == {"NEAR(alpha beta)"}
    assert found_completions(run, phrase="alpha beta") == {"alpha beta", "NEAR(alpha beta)"}
    assert found_completions(run, phrase="x AND y OR z") == {"x AND y OR z"}
    assert found_completions(run, phrase="col: value") == {"col: value"}
    assert found_completions(run, phrase="!cat:*") == {"fat & rat | !cat:*"}
    assert found_completions(run, phrase="star*") == {"star*"}
    assert found_completions(run, phrase="r*") == {"star*"}
    assert found_completions(run, phrase="l\x00b") == {"nul\x00byte"}
    assert found_completions(run, phrase="wait, LET me") == {"Wait, let me reconsider"}
    assert found_completions(run, phrase="café") == {"naïve café"}
    assert found_completions(run, q='"100%" -percent') == {"100% sure"}
    assert found_completions(run, q="alpha -NEAR") == {"alpha beta"}


HOSTILE = [
    {"phrase": "%"},
    {"phrase": "_"},
    {"phrase": "\\"},
    {"phrase": '"'},
    {"phrase": "x" * 200},
    {"phrase": "\x00"},
    {"q": '"unbalanced'},
    {"q": "-"},
    {"q": "OR OR"},
    {"q": "a:* & !b | (c"},
    {"q": "NEAR(a b, 2)"},
    {"q": "* ^ $"},
    {"q": "\x00\x00"},
    {"q": "x" * 201},
]


def test_a_hostile_search_is_answered_not_a_500(run, owner):
    Rollout.objects.bulk_create(make_rows(run, 20, random.Random(2)))
    client = api_client(owner)
    for query in HOSTILE:
        response = client.get(f"/api/runs/{run.pk}/rollouts", query)
        assert response.status_code in (200, 400), (query, response.content)
        if response.status_code == 400:
            assert "q:" in response.json()["detail"] or "phrase:" in response.json()["detail"], query


def test_the_index_follows_rows_changed_and_deleted(run):
    rng = random.Random(3)
    Rollout.objects.bulk_create(make_rows(run, 8, rng))
    first = Rollout.objects.filter(run=run).order_by("index").first()
    Rollout.objects.filter(pk=first.pk).update(completion="an edited marmot")
    assert found_completions(run, phrase="marmot") == {"an edited marmot"}
    Rollout.objects.filter(pk=first.pk).delete()
    assert found_completions(run, phrase="marmot") == set()


def test_search_across_runs_finds_only_what_the_user_may_see(run, owner, dataset_version, django_user_model, client):
    other = django_user_model.objects.create_user("other", password="pw-other-123")
    theirs = make_run(other, dataset_version, name="theirs")
    mine_too = make_run(owner, dataset_version, name="mine too")
    for target, text in ((run, "the ibex climbed"), (mine_too, "an IBEX again"), (theirs, "their ibex")):
        rows = make_rows(target, 2, random.Random(6))
        rows[1].completion = text
        Rollout.objects.bulk_create(rows)
    answer = api_client(owner).get("/api/search/rollouts", {"q": "ibex"})
    assert answer.status_code == 200, answer.content
    hits = answer.json()["hits"]
    assert {(h["run_name"], h["snippet"]) for h in hits} == {
        ("literal", "the ibex climbed"),
        ("mine too", "an IBEX again"),
    }
    assert [h["rollout_id"] for h in hits] == sorted((h["rollout_id"] for h in hits), reverse=True)
    first = api_client(owner).get("/api/search/rollouts", {"q": "ibex", "after": hits[0]["rollout_id"]}).json()
    assert [h["rollout_id"] for h in first["hits"]] == [hits[1]["rollout_id"]]
    on_prompts = api_client(owner).get("/api/search/rollouts", {"q": '"compute 0 squared"', "where": "prompt"})
    assert on_prompts.status_code == 200 and {h["where"] for h in on_prompts.json()["hits"]} == {"prompt"}
    assert api_client(owner).get("/api/search/rollouts", {"q": "-ibex"}).status_code == 400
    client.force_login(owner)
    page = client.get("/search/", {"q": "<b>ibex</b> OR ibex"})
    assert page.status_code == 200
    body = page.content.decode()
    assert "&lt;b&gt;ibex&lt;/b&gt;" in body and "the ibex climbed" in body and "their ibex" not in body


def test_a_search_page_cursor_past_the_database_s_integers_is_refused(owner, client):
    huge = "9" * 26  # SQLite cannot bind it: a 500 unless the form refuses it
    assert api_client(owner).get("/api/search/rollouts", {"q": "ibex", "after": huge}).status_code in (400, 422)
    client.force_login(owner)
    assert client.get("/search/", {"q": "ibex", "after": huge}).status_code == 400


def test_a_row_with_every_trigram_of_the_text_but_not_the_text_is_not_found(run):
    """The index names the rows holding each trigram of the text (SQLite keeps no positions); each is then checked:
    trigrams in another order, or apart, are not the text. In any case, in any script, wildcards taken literally."""
    rng = random.Random(11)
    rows = make_rows(run, 8, rng)
    texts = [
        "abcd",  # the text itself
        "abc then bcd",  # both trigrams of "abcd", apart
        "bcdabc",  # both, in the other order
        "A NAÏVE CAFÉ OWNER",
        "naive cafe",  # no diacritics: another text
        "ΣΟΦΊΑ ΚΑΙ ΓΝΏΣΗ",
        "x" * 5 + " the quick brown fox jumps over the lazy dog while 17% of it sleeps " + "y" * 5,
        "the quick brown fox jumps over the lazy dog while 17 of it sleeps",
    ]
    for row, text in zip(rows, texts, strict=True):
        row.completion = text
    Rollout.objects.bulk_create(rows)
    assert found_completions(run, phrase="abcd") == {"abcd"}
    assert found_completions(run, phrase="BCDA") == {"bcdabc"}
    assert found_completions(run, phrase="naïve café") == {"A NAÏVE CAFÉ OWNER"}
    assert found_completions(run, phrase="σοφία και") == {"ΣΟΦΊΑ ΚΑΙ ΓΝΏΣΗ"}
    long = "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG WHILE 17% OF IT"  # more trigrams than the index is asked for
    assert found_completions(run, phrase=long) == {texts[6]}
    assert found_completions(run, q=f'"{long.lower()}" -yyy') == set()


def _expected_page(run, positive: list[str], negative: list[str], size: int = 50) -> list[tuple[int, int]]:
    """The browser's first page by advantage, read in Python from every row: what any plan must give."""
    rows = Rollout.objects.filter(run=run).values_list("step", "index", "advantage", "id", "completion", "prompt")
    kept = [
        r
        for r in rows
        if all(t.lower() in r[4].lower() or t.lower() in r[5].lower() for t in positive)
        and not any(t.lower() in r[4].lower() or t.lower() in r[5].lower() for t in negative)
    ]
    kept.sort(key=lambda r: (r[2], r[3]), reverse=True)
    return [(r[0], r[1]) for r in kept[:size]]


def test_a_rare_text_beside_common_ones_is_found_from_its_few_rows(big_run, owner):
    """A rare text's rows are fetched from the index and sorted (runs.rollouts.filters.text_candidates), a common
    text's page is read in the browser's order; mixed, the rare one leads and every text is still checked."""
    needle = "quokka recomputed"
    cases = [
        ([needle], [], f'"{needle}"'),
        ([needle, "the"], [], f'"{needle}" the'),
        ([needle], ["zzzz"], f'"{needle}" -zzzz'),
        ([needle], ["determinant"], f'"{needle}" -determinant'),
        (["therefore"], [], "therefore"),
        (["the"], ["quokka"], "the -quokka"),
        (["compute it"], [], '"compute it"'),  # every prompt
    ]
    for positive, negative, q in cases:
        page = rollout_page(big_run, {"q": q, "sort": "adv_desc"})
        expected = _expected_page(big_run, positive, negative)
        assert [(r["step"], r["index"]) for r in page.rows] == expected, q
        assert expected or "determinant" in negative, q  # each case finds rows, but the one excluding them all
    # "or": either text
    page = rollout_page(big_run, {"q": f'"{needle}" or "no such words here"', "sort": "adv_desc"})
    assert [(r["step"], r["index"]) for r in page.rows] == _expected_page(big_run, [needle], [])
    # the search across runs: the same, newest first
    for q, positive, negative in (
        (f'"{needle}" the', [needle, "the"], []),
        ("quokka -zzzz", ["quokka"], []),
    ):
        hits = search_runs(owner, q).hits
        expected = sorted(_expected_page(big_run, positive, negative, size=10**6))
        assert sorted((h.step, h.index) for h in hits) == expected and expected, q
