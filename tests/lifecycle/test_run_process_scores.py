"""A run whose user-written (sandboxed) reward logs per-step scores, end to end with a real Celery worker and the tiny
model: the sandbox, the training program, the event log and the ingest carry each completion's scores to its stored
rollout, and the rollout page shades its steps."""

import pytest

from rewards.sandbox import sandbox_support
from rewards.services import reward_create
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Rollout, Run
from tests.conftest import wait_for
from tests.lifecycle.test_run_lifecycle import CONFIG, refreshed

SUPPORT = sandbox_support()
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}"),
]

# a process reward: each word is a step, scored 1 when its length is even, 0 when odd (a score for every step)
WORDS = """
def even_words(completions, log_extra, **kwargs):
    logged = [{"split": " ", "scores": [float(len(w) % 2 == 0) for w in c.split(" ")]} for c in completions]
    log_extra("step_scores", logged)
    return [sum(s["scores"]) / len(s["scores"]) for s in logged]
"""


def scores_of(completion: str) -> dict:
    return {"split": " ", "scores": [float(len(w) % 2 == 0) for w in completion.split(" ")]}


@pytest.fixture
def scored_run(celery_worker, owner, dataset_version):
    function = reward_create(owner=owner, name="even_words", source_code=WORDS, entrypoint="even_words")
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="process",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[{"name": "even_words", "weight": 1.0, "version_id": function.latest_version.pk, "version": 1}],
            config={**CONFIG, "max_steps": 3},
        ),
    )
    wait_for(lambda: refreshed(run).is_finished, timeout=300, what="the run to finish")
    assert run.status == Run.Status.COMPLETED, run.error
    return run


def test_a_sandboxed_rewards_step_scores_reach_every_stored_rollout(scored_run, web_server, page):
    rollouts = list(Rollout.objects.filter(run=scored_run).order_by("step", "index"))
    assert len(rollouts) == 3 * 8 and not scored_run.reward_faults
    for r in rollouts:
        assert r.step_scores == scores_of(r.completion), (r.step, r.index, r.step_scores)
        assert r.first_step_score == r.step_scores["scores"][0]

    from tests.rollouts.test_browser_inspection import login

    login(page, web_server)
    page.goto(f"{web_server}/runs/{scored_run.pk}/rollouts/")
    page.wait_for_selector("article.rollout .process-step")
    first = page.locator("article.rollout").first
    shown = first.locator(".process-step")
    assert shown.count() >= 1
    assert shown.nth(0).get_attribute("title").startswith("step 1: score ")
    assert shown.nth(0).get_attribute("data-score") in ("0", "1")
    assert shown.nth(0).evaluate("e => getComputedStyle(e).backgroundColor").startswith("rgba(")
