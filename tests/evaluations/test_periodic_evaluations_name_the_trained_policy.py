"""A periodic evaluation after step 0 scored the policy the run was training, not its base model: its row and its
page say "this run, step N", not the base model's name ("tiny"); the one at step 0 is the base model (issue 28,
item 13)."""

import pytest
from django.urls import reverse

from runs.evaluations.services import store_periodic
from tests.evaluations.test_evaluation_pages import PROMPTS, eval_event
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


def test_periodic_rows_name_the_trained_policy_at_their_step(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    before = store_periodic(run, {**eval_event(PROMPTS), "step": 0})
    after = store_periodic(run, {**eval_event(PROMPTS), "step": 4})
    rows = owner_client.get(reverse("run_evaluations_json", args=[run.pk])).json()["evaluations"]
    assert {r["id"]: r["evaluated"] for r in rows} == {before.pk: "tiny", after.pk: "this run, step 4"}
    assert {r["model"] for r in rows} == {"tiny"}  # what was loaded stays what it was, for scripts reading it
    page = owner_client.get(reverse("evaluation_detail", args=[run.pk, after.pk])).content.decode()
    assert '<p class="muted" id="evaluation-summary">this run, step 4 on' in page
