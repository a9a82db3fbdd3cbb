"""The reaper at its time boundaries: a running run whose heartbeat is older than the limit is failed (resumable with
a checkpoint), after ingesting what its event log still holds; a younger one is left alone."""

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.lifecycle.services import run_reap_stale
from runs.models import Rollout, Run
from runs.paths import event_log_path
from tests.lifecycle.test_run_lifecycle import refreshed

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


# The reaper asks the run folder's lock: the supervisor takes it and its trainer inherits it, so a live process
# holds it while either lives. A paused supervisor whose trainer trains on is never failed; a killed worker's run
# (its trainer died with it) is failed as soon as it has been silent for Run.SILENT_SECONDS.

HOLD = "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX)"


@pytest.fixture
def holder():
    """``holder(run)``: a real process holding the run folder's lock, as a trainer does (``holder(run, name)``: another
    lock, such as a supervisor's); killed at the end."""
    procs = []

    def hold(run, lock="trainer.lock"):
        run.run_dir.mkdir(parents=True, exist_ok=True)
        lock = run.run_dir / lock
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD + "; print('held', flush=True); time.sleep(600)", lock], stdout=subprocess.PIPE
        )
        procs.append(proc)
        assert proc.stdout.readline() == b"held\n"
        return proc

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


def gone(proc):
    """Kill a lock holder and wait until it has let go."""
    proc.kill()
    proc.wait()


def progress(client, run) -> dict:
    return client.get(f"/runs/{run.pk}/progress.json").json()


def test_a_silent_run_whose_trainer_still_holds_its_folder_is_never_failed(running, holder, owner_client):
    run = running(300)
    trainer = holder(run)
    assert run_reap_stale(timeout=60) == []
    assert refreshed(run).status == Run.Status.RUNNING
    shown = progress(owner_client, run)
    assert shown["status"] == "running" and shown["trainer_alive"] is True and shown["silent_seconds"] >= 300

    trainer.kill()  # the trainer ends too: now nothing trains, and the run is failed
    trainer.wait()
    assert progress(owner_client, run)["trainer_alive"] is False
    assert [r.pk for r in run_reap_stale(timeout=60)] == [run.pk]
    assert refreshed(run).status == Run.Status.FAILED


def test_a_run_whose_folder_nobody_holds_is_failed_once_silent_not_after_the_long_limit(running, holder):
    run = running(Run.SILENT_SECONDS + 2)
    trainer = holder(run)
    trainer.kill()  # a killed worker: the lock file is there, nothing holds it
    trainer.wait()
    assert [r.pk for r in run_reap_stale(timeout=60)] == [run.pk]
    assert refreshed(run).status == Run.Status.FAILED


def test_a_beating_run_is_not_shown_silent_and_a_briefly_quiet_one_is_left_alone(running, owner_client):
    beating, quiet = running(0), running(Run.SILENT_SECONDS - 3)
    assert run_reap_stale(timeout=60) == []
    assert progress(owner_client, beating)["silent_seconds"] is None
    assert progress(owner_client, quiet)["silent_seconds"] is None


# A supervisor holds a lock of its own (supervisor-<attempt>.lock) from its claim until it has recorded the outcome, and
# no child inherits it: free while the run is still running, the supervisor died without saying how the run ended.


def test_a_run_whose_supervisor_died_is_shown_lost_and_failed_after_three_missed_beats(running, holder, owner_client):
    run = running(Run.STALE_SECONDS + 1)
    supervisor = holder(run, "supervisor-1.lock")
    shown = progress(owner_client, run)
    assert shown["worker_lost"] is False and shown["step_age_seconds"] > Run.STALE_SECONDS  # paused or busy
    assert run_reap_stale(timeout=60) == []

    supervisor.kill()  # the worker is killed: its trainer dies with it, and nothing holds either lock
    supervisor.wait()
    shown = progress(owner_client, run)
    assert shown["status"] == "running" and shown["worker_lost"] is True and shown["silent_seconds"] is None
    assert [r.pk for r in run_reap_stale(timeout=60)] == [run.pk]  # long before Run.SILENT_SECONDS
    assert refreshed(run).status == Run.Status.FAILED
    assert progress(owner_client, run)["worker_lost"] is False


def test_a_dead_supervisors_run_is_left_alone_while_its_heartbeat_is_fresh_or_its_trainer_trains(
    running, holder, owner_client
):
    fresh, training = running(Run.STALE_SECONDS - 2), running(Run.SILENT_SECONDS + 2)
    for run in (fresh, training):
        gone(holder(run, "supervisor-1.lock"))
    holder(training)  # its trainer still holds the folder: it trains, so it is never failed
    assert run_reap_stale(timeout=60) == []
    assert progress(owner_client, fresh)["worker_lost"] is True  # shown at once; failed after three missed beats


def test_a_paused_supervisor_whose_trainer_stopped_is_failed_once_silent(running, holder):
    run = running(Run.SILENT_SECONDS - 2)
    holder(run, "supervisor-1.lock")  # alive, not beating: a paused one may wake and record the outcome itself
    gone(holder(run))  # its trainer has stopped
    assert run_reap_stale(timeout=60) == []
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=Run.SILENT_SECONDS + 2))
    assert [r.pk for r in run_reap_stale(timeout=60)] == [run.pk]
