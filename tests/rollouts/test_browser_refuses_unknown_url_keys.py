"""The rollout browser's address with a key that is no filter (a typo, stepmin=2) is refused as the API and the CLI
refuse it: the page says which key and which are known and shows no rows, and its JSON and exports answer 400;
a page with no matching row is never what a typo gets."""

import pytest
from django.urls import reverse

from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [("p", [("a", [1.0]), ("b", [0.0])])]))
    return run


def test_the_page_names_the_unknown_key(owner_client, run):
    page = owner_client.get(reverse("run_rollouts", args=[run.pk]), {"stepmin": "2", "reward_min": "0"})
    html = page.content.decode()
    assert page.status_code == 400
    assert 'id="unknown-filters"' in html and "unknown filter: stepmin (known: " in html and "step_min" in html


@pytest.mark.parametrize("name", ["run_rollouts_json", "run_rollouts_jsonl", "run_rollouts_parquet"])
def test_its_json_and_exports_refuse_it(owner_client, run, name):
    answer = owner_client.get(reverse(name, args=[run.pk]), {"stepmin": "2"})
    assert answer.status_code == 400
    assert answer.json()["errors"]["filters"][0].startswith("unknown filter: stepmin (known: ")


def test_known_keys_and_a_replay_still_work(owner_client, run):
    assert owner_client.get(reverse("run_rollouts", args=[run.pk]), {"step_min": "1"}).status_code == 200
    rows = owner_client.get(reverse("run_rollouts_json", args=[run.pk]), {"step_min": "1", "replay": ""}).json()
    assert len(rows["rows"]) == 2
