"""Small things a new user tripped over (issue 19's list): each fixed, each checked here."""

import pytest
from django.contrib.staticfiles import finders
from django.urls import reverse

from rewards.models import RewardFunction
from runs.lifecycle.trl_yaml import parse_run_yaml
from runs.models import Run
from tests.conftest import run_form_data, wait_for
from tests.lifecycle.test_run_yaml import TRL_CONFIG

pytestmark = pytest.mark.django_db


def test_the_favicon_is_served_and_linked_from_every_page(client, owner_client):
    response = client.get("/favicon.ico")  # asked for before any page is read, signed in or not
    assert response.status_code == 301 and response["Location"].endswith("/favicon.svg")
    assert finders.find("favicon.svg")
    assert 'rel="icon"' in owner_client.get(reverse("dashboard")).content.decode()


def test_a_reward_made_from_blank_starts_without_the_templates_description(owner_client, owner):
    owner_client.post(reverse("reward_new"), {"name": "mine", "template": ""})
    assert RewardFunction.objects.get(owner=owner, name="mine").description == ""
    owner_client.post(reverse("reward_new"), {"name": "acc", "template": "accuracy"})
    assert RewardFunction.objects.get(owner=owner, name="acc").description  # a library function keeps its own


def test_yaml_import_notes_are_a_warning_not_a_success(owner_client, owner, dataset_version):
    imported = parse_run_yaml(TRL_CONFIG, owner=owner)
    assert imported.notes  # the sample config has keys grpo-web sets itself
    page = owner_client.post(reverse("run_import"), {"yaml": TRL_CONFIG}).content.decode()
    assert 'class="flash warning" id="import-notes"' in page


@pytest.mark.django_db(transaction=True)
def test_a_clone_lands_on_the_new_run_which_links_to_the_diff(celery_worker, owner_client, owner, dataset_version):
    parent = Run.objects.create(
        owner=owner,
        name="base",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": None, "builtin": "digit_ratio"}],
        config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 2},
        total_steps=2,
        status=Run.Status.COMPLETED,
    )
    data = {**run_form_data(owner, run=parent), "max_steps": 1}
    response = owner_client.post(reverse("run_clone", args=[parent.pk]), data)  # the sandbox worker checks its reward
    clone = Run.objects.exclude(pk=parent.pk).get()
    assert response.status_code == 302 and response["Location"] == clone.get_absolute_url()
    page = owner_client.get(clone.get_absolute_url()).content.decode()
    assert reverse("run_diff", args=[parent.pk, clone.pk]) in page
    wait_for(lambda: clone.refresh_from_db() or clone.is_finished, timeout=120, what="the one-step clone")
