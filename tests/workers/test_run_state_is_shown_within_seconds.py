"""How fast a run's page tells the truth when the process behind it goes away, with real processes killed or paused.
A supervisor sees its trainer exit at once; a killed worker lets go of its supervisor lock (runs.paths.supervisor_alive),
so its page says "worker lost" within a poll and a live worker's reaper fails the run within a beat; a paused
supervisor's step is shown as stale, with its age, after three missed heartbeats (Run.STALE_SECONDS).

The bounds are about twice the figures measured on a loaded two-core machine (trainer killed: the run failed in 0.6-1.4 s;
worker killed: shown lost in 0.2 s, failed 3.1 s later with the test worker's 2 s beat; supervisor paused: shown
stale in 2.3 s). Before the supervisor lock, a killed worker's run was shown running for 9.8 s and a paused
supervisor's step was frozen without a word for 10 s."""

import os
import signal
import socket
import time
from contextlib import contextmanager

import psutil
import pytest

from rewards.models import RewardFunction
from runs.lifecycle.services import run_cancel
from runs.models import Run
from tests.conftest import start_worker, stop_process, wait_for
from tests.lifecycle.test_run_lifecycle import refreshed, submit, training_pid

pytestmark = [pytest.mark.django_db(transaction=True)]

BEAT = 2  # GRPO_WORKER_BEAT in the test workers' environment (tests/conftest.py)


def progress(client, run) -> dict:
    return client.get(f"/runs/{run.pk}/progress.json").json()


def within(bound: float, predicate, what: str):
    """The predicate's first true value; fails once ``bound`` seconds pass without one."""
    return wait_for(predicate, timeout=bound, interval=0.1, what=what)


@contextmanager
def trained_by_its_own_worker(service_env, tmp_path, owner, dataset_version, queue: str):
    """(worker, run): a run far from done, two steps in, trained by a Celery worker of its own (so the test may kill or
    pause it and hit only this run). The worker is stopped at the end, whatever the test did to it."""
    from workers.tasks import train_run

    worker = start_worker(service_env, f"{queue}-{os.getpid()}@{socket.gethostname()}", queue, tmp_path / "w.log")
    try:
        digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
        run = Run.objects.create(
            owner=owner,
            name=queue,
            model="tiny",
            dataset_version=dataset_version,
            rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk}],
            config={
                "num_generations": 4,
                "max_completion_length": 8,
                "per_device_train_batch_size": 8,
                "max_steps": 2000,
            },
            total_steps=2000,
        )
        train_run.apply_async(args=[run.pk], queue=queue)
        wait_for(lambda: refreshed(run).step >= 2, timeout=120, what="two steps")
        yield worker, run
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGCONT)  # a paused one, so that it can stop
        stop_process(worker)


def test_a_killed_training_process_fails_its_run_within_seconds(celery_worker, owner, dataset_version, client):
    run = submit(owner, dataset_version, max_steps=2000)
    wait_for(lambda: refreshed(run).step >= 2, timeout=120, what="two steps")
    os.kill(training_pid(run), signal.SIGKILL)
    client.force_login(owner)
    within(5, lambda: progress(client, run)["status"] == "failed", "the run shown failed")
    assert "exited with code -9" in refreshed(run).error, run.error


def test_a_killed_worker_is_shown_lost_at_once_and_failed_within_a_beat(
    celery_worker, owner, dataset_version, service_env, tmp_path, client
):
    with trained_by_its_own_worker(service_env, tmp_path, owner, dataset_version, "lost") as (doomed, run):
        client.force_login(owner)
        assert progress(client, run)["worker_lost"] is False
        os.killpg(doomed.pid, signal.SIGKILL)  # the worker, its pool process and the supervisor in it
        doomed.wait()
        shown = within(
            2, lambda: (p := progress(client, run))["worker_lost"] and p, "the page to say the worker is lost"
        )
        assert shown["status"] == "running" and shown["step"] >= 2  # not settled yet: a live worker checks its log
        # the session worker's reaper fails it once three heartbeats are missed, at its next beat
        within(Run.STALE_SECONDS + 2 * BEAT + 10, lambda: progress(client, run)["status"] == "failed", "the reaper")
        run = refreshed(run)
        assert "stopped responding" in run.error and run.lease is None
        assert progress(client, run)["worker_lost"] is False  # a settled run is no longer lost


def test_a_paused_supervisors_step_is_shown_stale_with_its_age(
    celery_worker, owner, dataset_version, service_env, tmp_path, client
):
    with trained_by_its_own_worker(service_env, tmp_path, owner, dataset_version, "stale") as (_, run):
        client.force_login(owner)
        assert progress(client, run)["step_age_seconds"] is None  # beating: the step is current
        supervisor = psutil.Process(training_pid(run)).ppid()
        os.kill(supervisor, signal.SIGSTOP)  # the trainer trains on; nothing ingests its steps
        try:
            first = within(
                Run.STALE_SECONDS + 3,
                lambda: (p := progress(client, run))["step_age_seconds"] is not None and p,
                "the step shown stale",
            )
            assert first["status"] == "running" and first["worker_lost"] is False  # paused, not dead
            assert first["step_age_seconds"] > Run.STALE_SECONDS
            time.sleep(1.5)
            later = progress(client, run)
            assert later["step"] == first["step"] and later["step_age_seconds"] >= first["step_age_seconds"] + 1
        finally:
            os.kill(supervisor, signal.SIGCONT)
        wait_for(lambda: progress(client, run)["step_age_seconds"] is None, timeout=30, what="the heartbeat again")
        run_cancel(run=run)
        wait_for(lambda: refreshed(run).is_finished, timeout=60, what="the run to stop")
        assert run.status == Run.Status.CANCELLED, run.error
