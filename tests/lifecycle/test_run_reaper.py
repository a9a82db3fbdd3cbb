"""The reaper at its time boundaries: a running run whose heartbeat is older than the limit is failed (resumable with
a checkpoint), after ingesting what its event log still holds; a younger one is left alone."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.lifecycle.services import run_reap_stale
from runs.models import Rollout, Run
from runs.paths import event_log_path

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(owner, dataset_version):
    def make(age_seconds, checkpoint_step=0):
        now = timezone.now()
        return Run.objects.create(
            owner=owner,
            name="r",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[],
            config={},
            total_steps=10,
            status=Run.Status.RUNNING,
            worker_name="w1@host",
            heartbeat_at=now - timedelta(seconds=age_seconds),
            checkpoint_step=checkpoint_step,
        )

    return make


def test_a_heartbeat_just_inside_the_limit_is_left_alone(running):
    run = running(59)
    assert run_reap_stale(timeout=60) == []
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_a_heartbeat_just_past_the_limit_fails_the_run(running):
    run = running(61)
    assert [r.pk for r in run_reap_stale(timeout=60)] == [run.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and not run.resumable
    assert "w1@host stopped responding (no heartbeat for 61 s)" in run.error


def test_a_reaped_run_with_a_checkpoint_is_resumable_and_its_log_is_ingested(running):
    run = running(300)
    log = event_log_path(run)
    log.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "index": i,
            "group": 0,
            "prompt": "p",
            "completion": "c",
            "rewards": [1.0],
            "reward": 1.0,
            "advantage": 0.0,
            "length": 1,
            "truncated": True,
        }
        for i in range(2)
    ]
    log.write_text(
        json.dumps({"type": "rollouts", "ts": 1.0, "step": 5, "rows": rows})
        + "\n"
        + json.dumps({"type": "checkpoint", "ts": 2.0, "step": 4, "path": "x"})
        + "\n"
    )
    run_reap_stale(timeout=60)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.resumable and run.checkpoint_step == 4
    assert Rollout.objects.filter(run=run, step=5).count() == 2


def test_finished_runs_are_never_reaped(running):
    run = running(1000)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    assert run_reap_stale(timeout=60) == []


def test_a_run_whose_training_finished_before_its_supervisor_died_is_completed(running):
    run = running(300, checkpoint_step=10)
    log = event_log_path(run)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(
        json.dumps({"type": "metrics", "ts": 1.0, "step": 10, "metrics": {"reward": 1.0}})
        + "\n"
        + json.dumps({"type": "finished", "ts": 2.0, "step": 10})
        + "\n"
    )
    run_reap_stale(timeout=60)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.step == 10
