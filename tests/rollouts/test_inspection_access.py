"""Every inspection page and endpoint answers 404 to anyone but the run's owner, and writes nothing for them."""

import pytest
from django.urls import reverse

from runs.models import Dataset
from runs.text import prompt_key
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [("What is 2 + 2?", [("4", [1.0, 1.0]), ("5", [0.0, 0.0])])]))
    return run


def urls(run):
    key = prompt_key("What is 2 + 2?")
    return [
        reverse(name, args=[run.pk, *extra])
        for name, extra in [
            ("run_rollouts", []),
            ("run_rollouts_json", []),
            ("run_rollouts_jsonl", []),
            ("run_rollouts_parquet", []),
            ("run_reflection", []),
            ("run_reflection_json", []),
            ("run_prompts", []),
            ("run_prompts_json", []),
            ("run_prompt", [key]),
            ("run_prompt_json", [key]),
            ("run_health_json", []),
        ]
    ]


def test_an_outsider_gets_404_on_every_inspection_url(outsider_client, run):
    for url in urls(run):
        assert outsider_client.get(url).status_code == 404, url


def test_the_owner_gets_each(owner_client, run):
    for url in urls(run):
        assert owner_client.get(url).status_code == 200, url


def test_an_outsider_can_neither_edit_phrases_nor_sample_a_dataset(outsider_client, run):
    assert outsider_client.post(reverse("run_reflection", args=[run.pk]), {"phrases": "x"}).status_code == 404
    run.refresh_from_db()
    assert "x" not in run.reflection_phrases
    assert outsider_client.post(reverse("run_rollouts_sft", args=[run.pk]), {"threshold": "0"}).status_code == 404
    assert not Dataset.objects.filter(owner__username="outsider").exists()


def test_an_anonymous_visitor_is_sent_to_log_in(client, run):
    response = client.get(reverse("run_rollouts", args=[run.pk]))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
