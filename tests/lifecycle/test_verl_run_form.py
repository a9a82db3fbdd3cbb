"""The run form's trainer: a verl run is created from the form, a clone keeps its trainer, and the refusals name
the field."""

import pytest
from django.urls import reverse

from rewards.models import RewardFunction
from runs.models import Run
from tests.conftest import run_form_data

# the form checks user reward functions' contract on a real sandbox worker; the runs themselves are not sent
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker", "no_enqueue")]


@pytest.fixture
def no_enqueue(monkeypatch):
    monkeypatch.setattr("runs.lifecycle.services._enqueue", lambda run: None)


def form(owner, dataset_version, **extra) -> dict:
    data = run_form_data(owner)
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    data.update(
        {
            "name": "v",
            "model": "tiny",
            "dataset_version": dataset_version.pk,
            "num_generations": 4,
            "per_device_train_batch_size": 8,
            f"reward_{digits.pk}": "on",
            f"weight_{digits.pk}": "1",
            f"version_{digits.pk}": "1",
            **extra,
        }
    )
    return data


def test_the_form_creates_a_verl_run_and_a_clone_keeps_its_trainer(owner_client, owner, dataset_version):
    page = owner_client.get(reverse("run_new")).content.decode()
    assert 'name="trainer"' in page and 'value="verl"' in page
    response = owner_client.post(
        reverse("run_new"), form(owner, dataset_version, trainer="verl", requested_gpus=1, queue_anyway="on")
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    run = Run.objects.get()
    assert run.trainer == Run.Trainer.VERL and run.requested_gpus == 1
    assert run_form_data(owner, run)["trainer"] == "verl"


def test_a_verl_run_on_a_cpu_is_refused_with_the_reason(owner_client, owner, dataset_version):
    response = owner_client.post(reverse("run_new"), form(owner, dataset_version, trainer="verl", requested_gpus=0))
    assert response.status_code == 400
    assert "verl generates with vLLM on GPUs" in response.content.decode()
    assert not Run.objects.exists()


def test_a_trl_run_stays_the_default(owner_client, owner, dataset_version):
    response = owner_client.post(reverse("run_new"), form(owner, dataset_version))
    assert response.status_code == 302
    assert Run.objects.get().trainer == Run.Trainer.TRL
