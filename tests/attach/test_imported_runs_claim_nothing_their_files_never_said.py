"""A run imported from TRL's or verl's files (tests/attach/conftest.py: written by TRL's and verl's own code), or
attached by a client that reported little, shows no blank and no false figure: a setting its files never held is
"unknown" and says why, a length they never held is not measured, and advantages grpo-web computed with verl's
estimator say so, with verl's epsilon, everywhere they are shown."""

import json
import re

import pytest
from django.urls import reverse

from runs.attach.services import external_run_create
from runs.models import Run
from tests.api.conftest import api_client
from tests.attach.test_import_a_run_through_the_api_and_pages import roots  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

IMPORTED = "not in the files this run was imported from"


def imported(owner, path: str) -> Run:
    answer = api_client(owner).post("/api/runs/import", {"path": path}, content_type="application/json")
    assert answer.status_code == 201, answer.content
    return Run.objects.get(pk=answer.json()["id"])


def text(response) -> str:
    assert response.status_code == 200
    return re.sub(r"\s+", " ", response.content.decode())


def summary(page: str) -> str:
    return page.split('id="run-summary">', 1)[1].split("</p>", 1)[0]


def assert_no_blank_or_none(page: str) -> None:
    assert not re.search(r"\b(G|lr|β|loss|scale_rewards|seed|max_length)=\s*[,<]", page.replace("<span", "§")), page
    assert "=None" not in page and "=</" not in page


def signals(client, run) -> dict:
    return {s["key"]: s for s in client.get(reverse("run_health_json", args=[run.pk])).json()["signals"]}


def test_a_verl_dump_says_what_it_never_held_and_who_computed_the_advantages(owner, owner_client, roots):  # noqa: F811
    run = imported(owner, "verl-rollouts")
    page = text(owner_client.get(run.get_absolute_url()))
    assert_no_blank_or_none(page)
    head = summary(page)
    assert head.startswith(f'<span class="unknown" data-unknown title="{IMPORTED}">unknown</span> ·')  # the model
    assert "base model (unknown: " in page
    assert "G=3" in head and f'lr=<span class="unknown" data-unknown title="{IMPORTED}">unknown</span>' in head
    assert "β=<span" in head and "scale_rewards=group" in head and "by verl's default" in head
    # verl's dump does not say how long the run was: no "step 2 / 0"
    assert re.search(r'id="progress-text">step 2 / <span class="unknown"', page), page
    assert "2/0" not in text(owner_client.get(reverse("dashboard")))
    # the Rollouts tab: computed by grpo-web with verl's estimator, epsilon 1e-6, as the header says; not TRL's
    formula = page.split('id="formula">', 1)[1].split("</p>", 1)[0]
    assert "+ 1e-6" in formula and "computed by grpo-web, with verl&#x27;s GRPO estimator" in formula
    assert "TRL" not in formula and "1e-4" not in formula
    step = owner_client.get(reverse("run_step_json", args=[run.pk, 1])).json()
    assert (step["advantages_by"], step["epsilon"], step["lengths_known"]) == (
        "grpo-web, with verl's GRPO estimator",
        "1e-6",
        False,
    )
    for c in [c for g in step["groups"] for c in g["completions"]]:  # the formula shown is the one that made them
        assert c["formula_advantage"] == pytest.approx(c["advantage"], abs=1e-6)
    browser = text(owner_client.get(reverse("run_rollouts", args=[run.pk])))
    assert "1e-6" in browser and 'id="lengths-unknown"' in browser and 'data-lengths-known=""' in browser
    health = signals(owner_client, run)
    assert "beta=0" not in json.dumps(health) and IMPORTED in health["kl_spike"]["detail"]
    lengths = health["detector/length_collapse"]
    assert lengths["level"] == "info" and lengths["detail"].startswith("not measured: completion lengths are unknown")
    assert "0 tokens" not in json.dumps(health)


def test_a_trl_output_dir_says_what_its_tables_never_held(owner, owner_client, roots):  # noqa: F811
    run = imported(owner, "trl-out")
    page = text(owner_client.get(run.get_absolute_url()))
    assert_no_blank_or_none(page)
    assert "G=4" in summary(page) and 'seed=<span class="unknown"' in summary(page)
    assert "step 3 / 3" in page and "computed by TRL" in page and "+ 1e-4" in page
    health = signals(owner_client, run)
    clipped = health["clipped_ratio"]["detail"]  # TRL logged the share; the limit is not in its files
    assert "max_completion_length=None" not in clipped and f"its value unknown: {IMPORTED}" in clipped
    assert health["detector/length_collapse"]["level"] == "info" and "0 tokens" not in json.dumps(health)
    step = owner_client.get(reverse("run_step_json", args=[run.pk, 3])).json()
    assert (step["advantages_by"], step["epsilon"], step["lengths_known"]) == ("TRL", "1e-4", False)


def test_an_attached_run_says_what_its_client_never_reported(owner, owner_client):
    run = external_run_create(
        owner=owner,
        name="quiet script",
        origin=Run.Origin.ATTACHED,
        model="tiny",
        config={"num_generations": 2},
        reward_names=["accuracy"],
    )
    page = text(owner_client.get(run.get_absolute_url()))
    assert_no_blank_or_none(page)
    assert (
        'β=<span class="unknown" data-unknown title="not reported by the script&#x27;s client">unknown</span>' in page
    )
    assert "step 0 / <span" in page
