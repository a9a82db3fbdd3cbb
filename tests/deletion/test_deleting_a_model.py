"""A model a finished run made (its final model, a checkpoint) is deleted by the run's owner: its folder goes, the
run stays. A model another run starts from, or a model of a run still training, is refused with the reason."""

import pytest
from django.urls import reverse

from grpo_web.removal import DeleteRefused
from runs.deletion.services import model_delete
from runs.models import Run
from runs.registry.selectors import run_models
from tests.conftest import logged_in
from tests.deletion.conftest import run_from, with_models
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


def test_a_checkpoint_goes_and_the_run_stays_without_resuming_from_it(
    owner, finished_run, django_capture_on_commit_callbacks
):
    finished_run.checkpoint_step, finished_run.resumable = 1, True
    finished_run.save(update_fields=["checkpoint_step", "resumable"])
    url = reverse("model_delete", args=[finished_run.pk, "checkpoint-1"])
    page = logged_in(owner).get(url).content.decode()
    assert "can no longer resume from step 1" in page and str(finished_run.run_dir / "output" / "checkpoint-1") in page
    with django_capture_on_commit_callbacks(execute=True):
        assert logged_in(owner).post(url).status_code == 302
    assert run_models(finished_run) == ["final"]
    finished_run.refresh_from_db()
    assert not finished_run.resumable and Run.objects.filter(pk=finished_run.pk).exists()


def test_a_model_another_run_starts_from_is_refused_naming_it(owner, outsider, dataset_version, finished_run):
    run_from(owner, dataset_version, str(finished_run.run_dir / "output" / "final"), name="round two")
    with pytest.raises(DeleteRefused) as refused:
        model_delete(run=finished_run, key="final", user=owner)
    assert refused.value.reasons == [
        "the model final of run 'old run' is the model of run 'round two' of owner (it starts from final): "
        "delete that first"
    ]
    model_delete(run=finished_run, key="checkpoint-1", user=owner)  # not the one it starts from


def test_a_model_of_a_run_still_training_is_refused(owner, dataset_version):
    run = with_models(make_run(owner, dataset_version, name="training", status=Run.Status.RUNNING), "checkpoint-1")
    with pytest.raises(DeleteRefused, match="'training' is running: its models change while it trains"):
        model_delete(run=run, key="checkpoint-1", user=owner)


def test_only_the_runs_owner_deletes_its_models(owner, outsider, finished_run):
    url = reverse("model_delete", args=[finished_run.pk, "final"])
    assert logged_in(outsider).get(url).status_code == 404
    assert logged_in(outsider).post(url).status_code == 404
    assert logged_in(owner).get(reverse("model_delete", args=[finished_run.pk, "checkpoint-9"])).status_code == 404
    assert run_models(finished_run) == ["final", "checkpoint-1"]
