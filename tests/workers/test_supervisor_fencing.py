"""Fencing: an attempt taken from its supervisor (reaped while the supervisor was paused or cut off) can no longer be
changed by it; that supervisor stops its trainer. A run folder is locked, so two trainers never share it."""

import os
import signal
import time

import psutil
import pytest

from runs.lifecycle.services import run_cancel, run_reap_stale, run_resume
from runs.models import Rollout, Run, StepMetric
from runs.paths import event_log_path
from runs.rollouts.ingest import Fenced, ingest_log
from tests.conftest import wait_for
from tests.lifecycle.test_run_lifecycle import refreshed, submit, training_pid
from tests.rollouts.inspect_data import make_run
from workers.supervisor import lock_folder


@pytest.mark.django_db
def test_an_ingest_under_a_lease_that_is_gone_writes_nothing(owner, dataset_version, tmp_path):
    import uuid

    run = make_run(owner, dataset_version, status=Run.Status.RUNNING, lease=uuid.uuid4())
    log = event_log_path(run)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text('{"type": "metrics", "ts": 1.0, "step": 1, "metrics": {"reward": 0.5}}\n')
    with pytest.raises(Fenced):
        ingest_log(run, log, lease=uuid.uuid4())
    assert not StepMetric.objects.filter(run=run).exists() and refreshed(run).event_offset == 0
    ingest_log(run, log, lease=run.lease)
    assert StepMetric.objects.filter(run=run).count() == 1


def test_a_run_folder_is_held_by_one_trainer_at_a_time(tmp_path):
    first = lock_folder(tmp_path / "run", wait=1)
    try:
        with pytest.raises(RuntimeError, match="another trainer still holds this run's folder"):
            lock_folder(tmp_path / "run", wait=1)
    finally:
        os.close(first)
    os.close(lock_folder(tmp_path / "run", wait=1))


@pytest.mark.django_db(transaction=True)
def test_a_supervisor_paused_past_the_heartbeat_timeout_changes_nothing_when_it_wakes(
    celery_worker, owner, dataset_version
):
    run = submit(owner, dataset_version, max_steps=2000)  # far from done while paused
    wait_for(lambda: refreshed(run).checkpoint_step >= 3, timeout=120, what="a checkpoint")
    trainer = training_pid(run)
    supervisor = psutil.Process(trainer).ppid()
    os.kill(supervisor, signal.SIGSTOP)
    try:
        time.sleep(3)
        # a reaper on this machine sees the trainer hold the folder and leaves the run alone (test_run_reaper.py); one
        # that cannot check the folder's lock (it moved away here, as on a host that does not see it) takes the attempt
        # after the heartbeat timeout
        assert run_reap_stale(timeout=2) == []
        (run.run_dir / "trainer.lock").rename(run.run_dir / "trainer.lock.elsewhere")
        assert [r.pk for r in run_reap_stale(timeout=2)] == [run.pk]
        reaped = refreshed(run)
        assert reaped.status == Run.Status.FAILED and "stopped responding" in reaped.error and reaped.resumable
        shown = (
            reaped.status,
            reaped.error,
            reaped.step,
            reaped.checkpoint_step,
            reaped.event_offset,
            StepMetric.objects.filter(run=run).count(),
            Rollout.objects.filter(run=run).count(),
        )
        time.sleep(2)  # the trainer goes on meanwhile, writing steps nobody may ingest
    finally:
        os.kill(supervisor, signal.SIGCONT)
    wait_for(
        lambda: not psutil.pid_exists(trainer) or psutil.Process(trainer).status() == psutil.STATUS_ZOMBIE,
        timeout=30,
        what="the woken supervisor to stop its trainer",
    )
    time.sleep(2)
    after = refreshed(run)
    assert (
        after.status,
        after.error,
        after.step,
        after.checkpoint_step,
        after.event_offset,
        StepMetric.objects.filter(run=run).count(),
        Rollout.objects.filter(run=run).count(),
    ) == shown
    os.close(lock_folder(run.run_dir, wait=5))  # the old supervisor and its trainer let go of the folder
    resumed = run_resume(run=after)
    assert resumed.status == Run.Status.QUEUED and resumed.attempt == 2
    wait_for(
        lambda: refreshed(run).status == Run.Status.RUNNING and run.step > after.checkpoint_step,
        timeout=120,
        what="the resumed attempt to train",
    )
    run_cancel(run=run)  # the test has seen what it needs
    wait_for(lambda: refreshed(run).is_finished, timeout=30, what="the resumed attempt to stop")
