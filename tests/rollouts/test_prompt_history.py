"""One prompt across steps (mean reward, solve rate), and the prompts that flipped from all-wrong to mixed or
all-right, with the solve criterion in the query string."""

import pytest
from django.urls import reverse

from runs.text import prompt_key
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db

HARD, EASY, NEVER = "What is 17 * 23?", "What is 1 + 1?", "Prove the Riemann hypothesis."
WRONG = [("no", [0.0, 0.0])] * 4
MIXED = [("391", [1.0, 0.5]), ("no", [0.0, 0.5]), ("no", [0.0, 0.0]), ("no", [0.0, 0.0])]
RIGHT = [("391", [1.0, 1.0])] * 4


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [(HARD, WRONG), (EASY, RIGHT), (NEVER, WRONG)]))
    ingest(run, rollouts_event(2, [(HARD, WRONG), (NEVER, WRONG)]))
    ingest(run, rollouts_event(3, [(HARD, MIXED), (EASY, MIXED)]))
    ingest(run, rollouts_event(5, [(HARD, RIGHT), (NEVER, WRONG)]))
    return run


def get(client, name, run, *args, **params):
    response = client.get(reverse(name, args=[run.pk, *args]), params)
    return response.status_code, response.json()


def test_one_prompt_across_steps(owner_client, run):
    status, d = get(owner_client, "run_prompt_json", run, prompt_key(HARD))
    assert status == 200
    assert d["prompt"] == HARD
    assert d["steps"] == [1, 2, 3, 5]
    assert d["completions"] == [4, 4, 4, 4]
    assert d["solve_rate"] == [0.0, 0.0, 0.25, 1.0]  # by the accuracy reward, at least 1
    assert d["mean_reward"] == [0.0, 0.0, pytest.approx(0.5), 2.0]
    assert "accuracy reward is at least 1" in d["criterion"]["text"]


def test_the_solve_criterion_comes_from_the_query_string(owner_client, run):
    _, d = get(owner_client, "run_prompt_json", run, prompt_key(HARD), solved_by="reward", threshold="0.5")
    assert d["solve_rate"] == [0.0, 0.0, 0.5, 1.0]
    status, d = get(owner_client, "run_prompt_json", run, prompt_key(HARD), solved_by="nonsense")
    assert status == 400 and "solved_by" in d["errors"]


def test_prompts_that_flipped_from_all_wrong(owner_client, run):
    status, d = get(owner_client, "run_prompts_json", run)
    assert status == 200
    assert d["prompts"] == 3 and d["revisited"] == 3 and d["flipped"] == 1
    (flip,) = d["shown"]
    assert flip["prompt"] == HARD and flip["key"] == prompt_key(HARD)
    assert (flip["all_wrong_step"], flip["flip_step"], flip["flipped_to"]) == (1, 3, "mixed")
    assert flip["solve_rate_at_flip"] == 0.25
    assert (flip["last_step"], flip["last_solve_rate"], flip["appearances"]) == (5, 1.0, 4)
    assert flip["url"] == reverse("run_prompt", args=[run.pk, prompt_key(HARD)])


def test_a_flip_straight_to_all_right_is_named_so(owner_client, run, owner, dataset_version):
    other = make_run(owner, dataset_version, name="other")
    ingest(other, rollouts_event(1, [(HARD, WRONG)]), rollouts_event(2, [(HARD, RIGHT)]))
    _, d = get(owner_client, "run_prompts_json", other)
    assert [(f["flip_step"], f["flipped_to"]) for f in d["shown"]] == [(2, "all right")]


def test_an_unknown_prompt_is_404(owner_client, run):
    assert owner_client.get(reverse("run_prompt", args=[run.pk, "0123456789abcdef"])).status_code == 404
    assert owner_client.get(reverse("run_prompt_json", args=[run.pk, "0123456789abcdef"])).status_code == 404


def test_a_run_that_never_came_back_to_a_prompt_says_how_many_it_revisited(owner_client, owner, dataset_version):
    once = make_run(owner, dataset_version, name="each prompt once")
    ingest(once, rollouts_event(1, [(HARD, WRONG)]), rollouts_event(2, [(EASY, RIGHT)]))
    _, d = get(owner_client, "run_prompts_json", once)
    assert (d["prompts"], d["revisited"], d["flipped"], d["shown"]) == (2, 0, 0, [])
