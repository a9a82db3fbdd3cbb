"""Cancel asks first; a cancelled run with a checkpoint can be resumed, one without cannot."""

import pytest
from django.urls import reverse

from runs.lifecycle.services import RunRefused, run_resume
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(owner, dataset_version):
    return Run.objects.create(
        owner=owner,
        name="long run",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config={"max_steps": 50},
        total_steps=50,
        status=Run.Status.RUNNING,
        step=12,
        checkpoint_step=10,
    )


def test_a_cancel_without_confirmation_asks_and_changes_nothing(owner_client, running):
    response = owner_client.post(reverse("run_cancel", args=[running.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Cancel “long run”?" in body and "resumed\n    from its checkpoint at step 10" in body
    running.refresh_from_db()
    assert running.status == Run.Status.RUNNING and running.cancel_requested_at is None


def test_a_confirmed_cancel_flags_the_running_run(owner_client, running):
    response = owner_client.post(reverse("run_cancel", args=[running.pk]), {"confirm": "yes"})
    assert response.status_code == 302
    running.refresh_from_db()
    assert running.cancel_requested_at is not None


def test_a_cancelled_run_with_a_checkpoint_is_resumable_and_resumes(running):
    running.mark_cancelled()
    assert running.resumable
    resumed = run_resume(run=running)
    assert (resumed.status, resumed.attempt, resumed.resumable) == (Run.Status.QUEUED, 2, False)


def test_a_cancelled_run_without_a_checkpoint_cannot_be_resumed(running):
    running.checkpoint_step = 0
    running.mark_cancelled()
    assert not running.resumable
    with pytest.raises(RunRefused, match="only a failed or cancelled run with a checkpoint can be resumed"):
        run_resume(run=running)


def test_the_run_page_offers_resume_for_a_cancelled_run_with_a_checkpoint(owner_client, running):
    running.mark_cancelled()
    page = owner_client.get(running.get_absolute_url()).content.decode()
    form = page.split('id="resume-form"', 1)[1].split(">", 1)[0]
    assert "hidden" not in form
    assert "Resume from step 10" in page
