"""An attached run whose client went silent: the page says "lost contact" after Run.LOST_SECONDS; past
GRPO_ATTACH_LOST_AFTER_S the reaper fails it, naming when the client was last heard; a client that speaks again
(cut off, not gone: its spool kept everything) reopens it, and its late batch is stored."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.attach.services import attached_run_reap_lost
from runs.models import Rollout, Run
from tests.attach.test_attach_api_refusals import lines, send
from tests.attach.test_external_runs import batch

pytestmark = pytest.mark.django_db

AFTER = 3600


def silent_for(created, seconds: int) -> Run:
    now = timezone.now()
    Run.objects.filter(pk=created["id"]).update(last_contact_at=now - timedelta(seconds=seconds))
    return Run.objects.get(pk=created["id"])


def test_a_client_silent_just_inside_the_limit_is_left_running(attached, owner_client):
    _, created = attached
    run = silent_for(created, AFTER - 1)
    assert attached_run_reap_lost(after=AFTER) == []
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.lost_contact
    assert "lost contact" in owner_client.get(run.get_absolute_url()).content.decode()


def test_a_client_silent_past_the_limit_fails_the_run_and_a_late_batch_reopens_it(attached, settings):
    api, created = attached
    run = silent_for(created, AFTER + 1)
    heard = run.last_contact_at
    settings.GRPO_ATTACH_LOST_AFTER_S = AFTER
    assert [r.pk for r in attached_run_reap_lost()] == [run.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and not run.resumable and not run.lost_contact
    assert run.error == f"lost contact: no word from the client since {heard:%Y-%m-%d %H:%M:%S} UTC"
    assert attached_run_reap_lost() == []  # reaped once

    data = lines(batch(1))
    answer = send(api, created, data, 0)
    assert answer.status_code == 200 and answer.json()["taken"] == len(data), answer.content
    run.refresh_from_db()
    assert (run.status, run.error, run.finished_at) == (Run.Status.RUNNING, "", None)
    assert Rollout.objects.filter(run=run).count() == len(batch(1)["rows"])


def test_a_run_that_ended_otherwise_is_not_reopened_by_a_heartbeat(attached):
    api, created = attached
    key = {"resume_key": created["resume_key"]}
    api.post(f"/api/attach/runs/{created['id']}/finish", {**key, "failed": False}, content_type="application/json")
    beat = api.post(f"/api/attach/runs/{created['id']}/heartbeat", key, content_type="application/json")
    assert beat.status_code == 200
    assert Run.objects.get(pk=created["id"]).status == Run.Status.COMPLETED
