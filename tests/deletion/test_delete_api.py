"""DELETE on the JSON API's objects: the owner's write token deletes (204); a refusal is a 409 with the reasons; a
read token is refused before anything happens (403); anyone else gets 404."""

import pytest

from rewards.models import RewardFunction
from runs.models import Dataset, Run
from tests.api.conftest import api_client
from tests.deletion.conftest import run_from
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


def test_the_owner_deletes_a_finished_run_and_a_running_one_is_refused(owner, outsider, dataset_version, finished_run):
    busy = make_run(owner, dataset_version, name="busy", status=Run.Status.QUEUED)
    assert api_client(outsider).delete(f"/api/runs/{finished_run.pk}").status_code == 404
    assert api_client(owner, "read").delete(f"/api/runs/{finished_run.pk}").status_code == 403
    refused = api_client(owner).delete(f"/api/runs/{busy.pk}")
    assert refused.status_code == 409 and refused.json() == {"errors": ["the run 'busy' is queued: cancel it first"]}
    assert api_client(owner).delete(f"/api/runs/{finished_run.pk}").status_code == 204
    assert list(Run.objects.values_list("name", flat=True)) == ["busy"]


def test_a_dataset_in_use_is_refused_then_deleted_once_its_runs_are(owner, outsider, dataset_version):
    run = make_run(owner, dataset_version, name="on it")
    url = f"/api/datasets/{dataset_version.dataset.pk}"
    assert api_client(outsider).delete(url).status_code == 404
    refused = api_client(owner).delete(url)
    assert refused.status_code == 409 and refused.json()["errors"] == [
        "v1 is the data of run 'on it' of owner: delete the run first"
    ]
    assert api_client(owner).delete(f"/api/runs/{run.pk}").status_code == 204
    assert api_client(owner).delete(url).status_code == 204
    assert not Dataset.objects.exists()


def test_a_reward_function_is_deleted_by_its_owner_only(owner, outsider, reward):
    assert api_client(outsider).delete(f"/api/rewards/{reward.pk}").status_code == 404
    assert api_client(owner, "read").delete(f"/api/rewards/{reward.pk}").status_code == 403
    assert api_client(owner).delete(f"/api/rewards/{reward.pk}").status_code == 204
    assert not RewardFunction.objects.filter(pk=reward.pk).exists()


def test_a_model_another_run_starts_from_is_refused(owner, outsider, dataset_version, finished_run):
    run_from(owner, dataset_version, str(finished_run.run_dir / "output" / "final"), name="round two")
    assert api_client(outsider).delete(f"/api/models/{finished_run.pk}/final").status_code == 404
    assert api_client(owner).delete(f"/api/models/{finished_run.pk}/nothing").status_code == 404
    refused = api_client(owner).delete(f"/api/models/{finished_run.pk}/final")
    assert refused.status_code == 409 and "run 'round two' of owner" in refused.json()["errors"][0]
    assert api_client(owner).delete(f"/api/models/{finished_run.pk}/checkpoint-1").status_code == 204
