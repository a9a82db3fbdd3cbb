"""The rollout browser's JSON: every filter and sort across all steps agrees with the same filter applied by hand to
every stored row, keyset pages cover the matches exactly once, and bad parameters are refused by name."""

import random

import pytest
from django.urls import reverse

from runs.models import Rollout
from runs.rollouts import filters as rollout_filters
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db

WORDS = ["carrot", "banana", "seven", "Wait, let me check.", "Actually the answer is 4.", "hmm", "apples"]


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version)
    rng = random.Random(7)
    for step in range(1, 6):
        groups = []
        for g in range(3):
            if g == 2:  # one zero-variance group per step
                completions = [(f"step {step} same answer {k}", [1.0, 0.5]) for k in range(4)]
            else:
                completions = [
                    (
                        " ".join(rng.sample(WORDS, 3)) + f" #{step}.{g}.{k}",
                        [float(rng.random() < 0.5), round(rng.random(), 2)],
                    )
                    for k in range(4)
                ]
            groups.append((f"Prompt {g}: what is {g} + {g}?", completions))
        if step == 3:  # every reward function abstained: no reward, advantage 0
            groups.append(("Unscorable?", [(f"??? {k}", [None, None]) for k in range(4)]))
        ingest(run, rollouts_event(step, groups, lengths=[5, 15, 25, 35], truncated=[0, 0, 0, 1]))
    return run


def rows(run):
    return list(Rollout.objects.filter(run=run).values())


def fetch(client, run, **params):
    response = client.get(reverse("run_rollouts_json", args=[run.pk]), params)
    assert response.status_code == 200, response.content
    return response.json()


def all_pages(client, run, **params):
    seen, data = [], fetch(client, run, **params)
    seen += data["rows"]
    while data["next_cursor"]:
        data = fetch(client, run, **params, after=data["next_cursor"])
        seen += data["rows"]
    return seen


def by_advantage(expected):
    return [r["id"] for r in sorted(expected, key=lambda r: (r["advantage"], r["id"]), reverse=True)]


CASES = {
    "reward range": (
        {"reward_min": "0.6", "reward_max": "1.4"},
        lambda r: r["reward"] is not None and 0.6 <= r["reward"] <= 1.4,
    ),
    "advantage range": ({"adv_min": "-0.5", "adv_max": "0.9"}, lambda r: -0.5 <= r["advantage"] <= 0.9),
    "length": ({"len_min": "10", "len_max": "30"}, lambda r: 10 <= r["length"] <= 30),
    "truncated": ({"truncated": "yes"}, lambda r: r["truncated"]),
    "not truncated": ({"truncated": "no"}, lambda r: not r["truncated"]),
    "zero variance": ({"zero_std": "yes"}, lambda r: r["zero_std"]),
    "reflective": ({"reflective": "yes"}, lambda r: bool(r["reflections"])),
    "one reflection phrase": ({"reflection": "let me check"}, lambda r: "let me check" in r["reflections"]),
    "contains a phrase": ({"phrase": "CARROT"}, lambda r: "carrot" in r["completion"].lower()),
    "steps": ({"step_min": "2", "step_max": "3"}, lambda r: 2 <= r["step"] <= 3),
    "combined": (
        {"reward_min": "0.5", "phrase": "banana", "step_min": "2"},
        lambda r: r["reward"] is not None and r["reward"] >= 0.5 and "banana" in r["completion"] and r["step"] >= 2,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_filter_matches_the_same_filter_applied_to_every_stored_row(owner_client, run, case):
    params, keep = CASES[case]
    expected = [r for r in rows(run) if keep(r)]
    assert expected, "the fixture must hold matching rows"
    got = all_pages(owner_client, run, **params)
    assert [r["id"] for r in got] == by_advantage(expected)


def test_full_text_search_finds_words_in_any_order_and_excludes_minus_words(owner_client, run):
    expected = [
        r
        for r in rows(run)
        if "carrot" in r["completion"] and "apples" in r["completion"] and "banana" not in r["completion"]
    ]
    assert expected
    got = all_pages(owner_client, run, q="apples carrot -banana")
    assert sorted(r["id"] for r in got) == sorted(r["id"] for r in expected)


def test_full_text_search_looks_at_the_prompt_too(owner_client, run):
    expected = [r for r in rows(run) if "Unscorable" in r["prompt"]]
    assert len(expected) == 4 and not any("unscorable" in r["completion"].lower() for r in expected)
    got = all_pages(owner_client, run, q="unscorable")
    assert sorted(r["id"] for r in got) == sorted(r["id"] for r in expected)
    assert all_pages(owner_client, run, q="carrot -unscorable") == all_pages(owner_client, run, q="carrot")


@pytest.mark.parametrize(
    "sort,key,reverse",
    [
        ("adv_desc", lambda r: (r["advantage"], r["id"]), True),
        ("adv_asc", lambda r: (r["advantage"], r["id"]), False),
        ("reward_desc", lambda r: (r["reward"], r["id"]), True),
        ("reward_asc", lambda r: (r["reward"], r["id"]), False),
        ("step_asc", lambda r: (r["step"], r["index"]), False),
        ("step_desc", lambda r: (r["step"], r["index"]), True),
    ],
)
def test_keyset_pages_cover_every_row_once_in_the_sort_order(owner_client, run, monkeypatch, sort, key, reverse):
    monkeypatch.setattr(rollout_filters, "PAGE_SIZE", 7)
    got = all_pages(owner_client, run, sort=sort)
    # sorted by reward, the unscorable completions (no reward) are left out
    expected = sorted(
        [r for r in rows(run) if r["reward"] is not None or "reward" not in sort], key=key, reverse=reverse
    )
    assert [r["id"] for r in got] == [r["id"] for r in expected]
    assert len(got) == (60 if "reward" in sort else 64)


def test_a_page_links_to_the_next_and_the_last_page_to_none(owner_client, run, monkeypatch):
    monkeypatch.setattr(rollout_filters, "PAGE_SIZE", 25)
    first = fetch(owner_client, run, zero_std="no", reward_min="0")
    assert len(first["rows"]) == 25 and first["next"].startswith(reverse("run_rollouts", args=[run.pk]))
    assert "zero_std=no" in first["next"] and "after=" in first["next"]
    second = fetch(owner_client, run, zero_std="no", reward_min="0", after=first["next_cursor"])
    assert len(second["rows"]) == 15 and second["next"] == "" and second["next_cursor"] == ""


def test_rows_carry_rewards_by_name_highlight_spans_and_links(owner_client, run):
    data = fetch(owner_client, run, reflection="let me check")
    row = data["rows"][0]
    assert set(row["rewards"]) == {"accuracy", "digit_ratio"}
    start, end = row["spans"][0]
    assert row["completion"][start:end].lower() in ("wait", "let me check", "actually", "hmm")
    assert row["group_url"] == f"/runs/{run.pk}/?step={row['step']}#group-{row['group']}"
    assert row["prompt_url"] == f"/runs/{run.pk}/prompts/{row['prompt_key']}/"


@pytest.mark.parametrize(
    "params,field",
    [
        ({"reward_min": "lots"}, "reward_min"),
        ({"step_min": "-1"}, "step_min"),
        ({"sort": "random"}, "sort"),
        ({"reflection": "not a phrase of this run"}, "reflection"),
        ({"after": "nonsense"}, "after"),
        ({"adv_max": "nan"}, "adv_max"),
    ],
)
def test_bad_parameters_are_refused_by_name(owner_client, run, params, field):
    response = owner_client.get(reverse("run_rollouts_json", args=[run.pk]), params)
    assert response.status_code == 400
    assert field in response.json()["errors"]


def test_the_browser_page_keeps_its_filters_in_its_address(owner_client, run):
    url = reverse("run_rollouts", args=[run.pk]) + "?reward_min=0.5&zero_std=no&sort=step_desc&after=1~2"
    html = owner_client.get(url).content.decode()
    assert 'name="reward_min" value="0.5"' in html
    assert 'value="step_desc" selected' in html
    # exports and rejection sampling take the filters, never the page cursor
    assert f'/runs/{run.pk}/rollouts.jsonl?reward_min=0.5&amp;zero_std=no&amp;sort=step_desc"' in html


def test_the_run_page_offers_the_browser_and_its_step_view_reads_the_step_from_the_address(owner_client, run):
    html = owner_client.get(reverse("run_detail", args=[run.pk]) + "?step=3").content.decode()
    assert reverse("run_rollouts", args=[run.pk]) in html
    assert "advantage = (reward − group mean) / (group std + 1e-4)" in html


def test_a_slow_text_search_stops_at_the_time_limit_with_advice(owner_client, run, monkeypatch):
    from django.db import connection

    monkeypatch.setattr(rollout_filters, "SEARCH_TIMEOUT_MS", 50)
    slow = (  # PostgreSQL's statement_timeout; SQLite's progress handler (it has no sleep: a long count)
        "SELECT pg_sleep(1)"
        if connection.vendor == "postgresql"
        else "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) SELECT max(i) FROM n"
    )
    with pytest.raises(rollout_filters.SearchTooSlow, match="narrow it with a step range"):
        rollout_filters.guarded(lambda: connection.cursor().execute(slow), text=True)
    # the page itself still answers
    assert len(fetch(owner_client, run, phrase="carrot")["rows"]) > 0


def test_a_rollout_scored_by_code_tests_shows_which_tests_passed(owner, dataset_version, owner_client):
    run = make_run(owner, dataset_version)
    event = rollouts_event(
        1,
        [("Write add(a, b).", [("```python\ndef add(a, b): return a - b\n```", [0.5, 0.0]), ("no code", [0.0, 0.0])])],
    )
    outcome = [
        {"test": "assert add(1, 2) == 3", "passed": False, "error": "AssertionError: "},
        {"test": "assert add(0, 0) == 0", "passed": True, "error": ""},
    ]
    event["rows"][0]["columns"] = {"tests": "[...]", "code_tests": outcome}
    ingest(run, event)
    by_index = {r["index"]: r for r in fetch(owner_client, run)["rows"]}
    assert by_index[0]["code_tests"] == outcome
    assert "code_tests" not in by_index[1] and "columns" not in by_index[0]  # the row's other columns stay home
