"""One prompt side by side: each run's G completions at one step, with rewards and advantages, stepped in sync."""

import hashlib

import pytest
from django.urls import reverse

from runs.compare.selectors import prompt_hash
from tests.compare.compare_data import add_group, make_run

pytestmark = pytest.mark.django_db

PROMPT = "What is 2 + 3?"


@pytest.fixture
def runs(owner, dataset_version):
    """a samples the prompt at steps 1 and 3, b at step 2; both see another prompt at step 1."""
    a = make_run(owner, dataset_version, "a")
    b = make_run(owner, dataset_version, "b", rewards=("digit_ratio", "accuracy"))
    add_group(a, 1, "other", [[0.0, 0.0]] * 4)
    add_group(
        a,
        1,
        PROMPT,
        [[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]],
        completions=["5", "six", "<think>hmm</think>", "7"],
    )
    add_group(a, 3, PROMPT, [[1.0, 1.0]] * 4)
    add_group(b, 1, "other", [[0.0, 0.0]] * 4)
    add_group(
        b,
        2,
        PROMPT,
        [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.5, None]],
        completions=["12", "5", "", "2.5"],
        reflections=[[], ["wait"], [], []],
    )
    return a, b


def side_by_side(client, runs, **params):
    query = {"runs": ",".join(str(r.pk) for r in runs), "prompt": prompt_hash(PROMPT), **params}
    response = client.get(reverse("run_compare_transcripts"), query)
    assert response.status_code == 200, response.content
    return response.json()


def test_each_run_shows_its_group_of_the_prompt_with_rewards_and_advantages(owner_client, runs):
    a, b = runs
    data = side_by_side(owner_client, runs, step="2")
    assert data["prompt"] == {"hash": prompt_hash(PROMPT), "text": PROMPT}
    assert data["step"] == 2 and data["steps"] == [1, 2, 3]
    col_a, col_b = data["runs"]
    assert (col_a["id"], col_a["shown_step"], col_a["steps"]) == (a.pk, 1, [1, 3])  # its last sample before step 2
    assert (col_b["id"], col_b["shown_step"], col_b["steps"]) == (b.pk, 2, [2])
    assert col_b["reward_names"] == ["digit_ratio", "accuracy"]
    [group] = col_b["groups"]
    # totals 1, 2, 0, 0.5: mean 0.875, sample std 0.8539; ranked by advantage as the run page ranks them
    assert [c["completion"] for c in group["completions"]] == ["5", "12", "2.5", ""]
    assert [c["reward"] for c in group["completions"]] == [2.0, 1.0, 0.5, 0.0]
    assert [c["advantage"] for c in group["completions"]] == pytest.approx(
        [(t - 0.875) / (0.853913 + 1e-4) for t in (2.0, 1.0, 0.5, 0.0)], abs=1e-4
    )
    assert group["completions"][0]["rewards"] == {"digit_ratio": 1.0, "accuracy": 1.0}
    assert group["completions"][2]["rewards"] == {"digit_ratio": 0.5, "accuracy": None}
    assert group["mean"] == pytest.approx(0.875)
    # solved: accuracy at least 1 (both runs have accuracy)
    assert [c["solved"] for c in group["completions"]] == [True, False, False, False]
    assert group["completions"][0]["reflections"] == ["wait"]
    assert [c["solved"] for c in col_a["groups"][0]["completions"]] == [True, False, False, False]


def test_one_step_moves_every_column(owner_client, runs):
    at_1 = side_by_side(owner_client, runs, step="1")["runs"]
    assert [(c["shown_step"], len(c["groups"])) for c in at_1] == [(1, 1), (None, 0)]  # b had not sampled it yet
    at_3 = side_by_side(owner_client, runs, step="3")["runs"]
    assert [c["shown_step"] for c in at_3] == [3, 2]


def test_without_a_step_it_shows_the_latest(owner_client, runs):
    data = side_by_side(owner_client, runs)
    assert data["step"] == 3
    assert [c["shown_step"] for c in data["runs"]] == [3, 2]


def test_the_solve_criterion_marks_the_completions(owner_client, runs):
    data = side_by_side(owner_client, runs, step="2", solved_by="reward", threshold="1")
    assert [c["solved"] for c in data["runs"][1]["groups"][0]["completions"]] == [True, True, False, False]


def test_a_prompt_is_named_by_a_hash_of_its_text(owner_client, runs):
    assert prompt_hash(PROMPT) == hashlib.sha256(PROMPT.encode()).hexdigest()[:16]
    response = owner_client.get(
        reverse("run_compare_transcripts"),
        {"runs": ",".join(str(r.pk) for r in runs), "prompt": prompt_hash("never asked")},
    )
    assert response.status_code == 404


def test_the_page_keeps_its_state_in_the_url(owner_client, runs):
    a, b = runs
    response = owner_client.get(
        reverse("run_compare"),
        {
            "runs": f"{a.pk},{b.pk}",
            "metric": "kl",
            "smooth": "0.3",
            "x": "time",
            "prompt": prompt_hash(PROMPT),
            "step": "2",
        },
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert '<option value="kl" selected>' in html
    assert 'value="0.3"' in html
    assert '<option value="time" selected>' in html
    assert 'id="follow" checked' not in html  # a step in the URL: the page stays on it
