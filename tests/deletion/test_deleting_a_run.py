"""A finished run is deleted by its owner, after a page that lists what goes: its rows, its rollouts and its folder.
A run still queued or running, or whose model another run starts from, is refused with the reason; anyone but the
owner gets 404, and a path outside the data folder is never removed."""

from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from grpo_web.removal import DeleteRefused
from runs.deletion.services import run_delete
from runs.models import Rollout, Run, RunShare, StepMetric
from tests.conftest import logged_in
from tests.deletion.conftest import run_from
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


def test_the_confirmation_names_the_rows_rollouts_and_folder_and_deletes_only_on_post(
    owner, finished_run, django_capture_on_commit_callbacks
):
    url = reverse("run_delete", args=[finished_run.pk])
    page = logged_in(owner).get(url)
    text = page.content.decode()
    assert page.status_code == 200
    assert "the run &#x27;old run&#x27;" in text and "2 rollouts" in text and "1 logged step" in text
    assert str(finished_run.run_dir) in text and 'method="post"' in text and "csrfmiddlewaretoken" in text
    assert Run.objects.filter(pk=finished_run.pk).exists()  # a GET deletes nothing

    with django_capture_on_commit_callbacks(execute=True):  # the folder goes once the rows are gone for good
        response = logged_in(owner).post(url, follow=True)
    assert response.redirect_chain[-1][0] == reverse("dashboard")
    assert "Deleted the run" in response.content.decode()
    assert not Run.objects.filter(pk=finished_run.pk).exists()
    assert not Rollout.objects.filter(run_id=finished_run.pk).exists()
    assert not StepMetric.objects.filter(run_id=finished_run.pk).exists()
    assert not finished_run.run_dir.exists()


def test_a_queued_or_running_run_is_refused_until_cancelled(owner, dataset_version):
    run = make_run(owner, dataset_version, name="busy", status=Run.Status.RUNNING)
    with pytest.raises(DeleteRefused, match="'busy' is running: cancel it first"):
        run_delete(run=run, user=owner)
    response = logged_in(owner).post(reverse("run_delete", args=[run.pk]))
    assert response.status_code == 409 and "cancel it first" in response.content.decode()
    assert Run.objects.filter(pk=run.pk).exists()


def test_a_run_whose_model_another_run_starts_from_is_refused_naming_it(owner, member, dataset_version, finished_run):
    run_from(member, dataset_version, str(finished_run.run_dir / "output" / "final"))
    with pytest.raises(DeleteRefused) as refused:
        run_delete(run=finished_run, user=owner)
    assert refused.value.reasons == [
        "the run 'old run' made the model of run 'follow-up' of member (it starts from final): delete that first"
    ]
    assert finished_run.run_dir.exists() and Rollout.objects.filter(run_id=finished_run.pk).count() == 2


def test_only_the_owner_deletes_a_team_member_who_may_write_gets_404(owner, member, outsider, team, finished_run):
    RunShare.objects.create(run=finished_run, team=team, can_write=True)
    url = reverse("run_delete", args=[finished_run.pk])
    for user in (member, outsider):
        assert logged_in(user).get(url).status_code == 404
        assert logged_in(user).post(url).status_code == 404
    with pytest.raises(PermissionError):
        run_delete(run=finished_run, user=member)
    assert Run.objects.filter(pk=finished_run.pk).exists() and finished_run.run_dir.exists()


def test_a_delete_needs_a_post_with_the_csrf_token(owner, finished_run):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post(reverse("run_delete", args=[finished_run.pk])).status_code == 403
    assert logged_in(owner).delete(reverse("run_delete", args=[finished_run.pk])).status_code == 405
    assert Run.objects.filter(pk=finished_run.pk).exists()


def test_a_run_folder_that_leads_outside_the_data_folder_is_not_followed(
    owner, dataset_version, tmp_path, django_capture_on_commit_callbacks
):
    run = make_run(owner, dataset_version, name="linked")
    outside = tmp_path / "elsewhere"
    (outside / "output").mkdir(parents=True)
    (outside / "keep.txt").write_text("not the app's")
    Path(run.run_dir).parent.mkdir(parents=True, exist_ok=True)
    run.run_dir.symlink_to(outside, target_is_directory=True)
    try:
        assert Path(settings.DATA_DIR).resolve() not in outside.resolve().parents
        with django_capture_on_commit_callbacks(execute=True):
            run_delete(run=run, user=owner)
        assert (outside / "keep.txt").read_text() == "not the app's"
        assert not Run.objects.filter(pk=run.pk).exists()
    finally:
        run.run_dir.unlink(missing_ok=True)


def test_a_stage_of_a_running_recipe_is_refused(owner, finished_run):
    from runs.models import Recipe

    Recipe.objects.create(
        owner=owner,
        name="r1",
        stages=[{"kind": "sft"}, {"kind": "grpo"}],
        outputs=[{"run": finished_run.pk, "status": "completed"}, {}],
        status=Recipe.Status.RUNNING,
        current=1,
    )
    with pytest.raises(DeleteRefused, match="a stage of recipe 'r1', still running"):
        run_delete(run=finished_run, user=owner)
