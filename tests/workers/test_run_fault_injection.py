"""Faults injected with real processes mid-run. Each ends in a defined run state with no lost or duplicated rollout
rows, and resume (or the run itself) then completes the run."""

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest
from django.conf import settings
from django.db import connection

from rewards.models import RewardFunction
from runs.lifecycle.services import run_cancel, run_reap_stale, run_resume
from runs.models import Rollout, Run, StepMetric
from tests.conftest import start_worker, stop_process, wait_for
from tests.lifecycle.test_run_lifecycle import assert_complete_and_unique, refreshed, submit, training_pid

pytestmark = [pytest.mark.django_db(transaction=True)]


def progress(client, run) -> dict:
    return client.get(f"/runs/{run.pk}/progress.json").json()


def test_killing_the_worker_lets_the_reaper_fail_the_run_and_resume_complete_it(
    celery_worker, owner, dataset_version, service_env, tmp_path, client
):
    from workers.tasks import train_run

    # a worker of its own on a queue of its own, so the kill hits the worker running this run
    name = f"doomed-{os.getpid()}@{socket.gethostname()}"
    doomed = start_worker(service_env, name, "faults", tmp_path / "doomed.log")
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    run = Run.objects.create(
        owner=owner,
        name="doomed",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk}],
        config={
            "num_generations": 4,
            "max_completion_length": 8,
            "per_device_train_batch_size": 8,
            "seed": 5,
            "save_steps": 3,
            "max_steps": 40,
        },
        total_steps=40,
    )
    train_run.apply_async(args=[run.pk], queue="faults")
    wait_for(lambda: refreshed(run).checkpoint_step >= 3 and run.step >= 4, timeout=120, what="a checkpoint")
    pid = training_pid(run)
    os.killpg(doomed.pid, signal.SIGKILL)  # the worker, its pool process and the supervisor in it
    doomed.wait()
    # the training process dies with its supervisor (PR_SET_PDEATHSIG): nothing trains unobserved
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), timeout=10, what="the orphaned training process to die")
    # within a heartbeat or so the page says what it is (no heartbeat, nothing training), and the reaper fails the
    # run at once since its folder lock is free (GRPO_HEARTBEAT_TIMEOUT, 60 s, is for folders it cannot check): the
    # session worker's own beat may do it first
    client.force_login(owner)
    wait_for(
        lambda: (p := progress(client, run))["silent_seconds"] is not None or p["status"] == "failed",
        timeout=60,
        what="the silence shown",
    )
    shown = progress(client, run)
    if shown["status"] == "running":
        assert shown["trainer_alive"] is False
        run_reap_stale()
    run = refreshed(run)
    assert run.status == Run.Status.FAILED and run.resumable
    assert "stopped responding" in run.error
    kept = Rollout.objects.filter(run=run).count()
    assert kept >= run.checkpoint_step * 8

    run_resume(run=run)  # the session's worker takes it
    wait_for(lambda: refreshed(run).is_finished, timeout=180, what="the resumed run")
    assert run.status == Run.Status.COMPLETED, run.error
    assert_complete_and_unique(run, steps=40)


def test_a_paused_supervisor_is_shown_paused_never_failed_while_its_trainer_trains(
    celery_worker, owner, dataset_version, service_env, tmp_path, client
):
    from workers.tasks import train_run

    name = f"paused-{os.getpid()}@{socket.gethostname()}"
    paused = start_worker(service_env, name, "pauses", tmp_path / "paused.log")
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    run = Run.objects.create(
        owner=owner,
        name="paused",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk}],
        # far from done while paused: the trainer is still training when the silence shows
        config={"num_generations": 4, "max_completion_length": 8, "per_device_train_batch_size": 8, "max_steps": 2000},
        total_steps=2000,
    )
    try:
        train_run.apply_async(args=[run.pk], queue="pauses")
        wait_for(lambda: refreshed(run).step >= 2, timeout=120, what="two steps")
        pid = training_pid(run)
        os.killpg(paused.pid, signal.SIGSTOP)  # the worker, its pool process and the supervisor: the trainer trains on
        client.force_login(owner)
        shown = wait_for(
            lambda: (p := progress(client, run))["silent_seconds"] is not None and p, timeout=30, what="the silence"
        )
        assert shown["status"] == "running" and shown["trainer_alive"] is True
        assert os.path.exists(f"/proc/{pid}")
        time.sleep(2)
        assert run_reap_stale(timeout=1) == []  # past any limit, but its trainer holds the folder: not failed
        assert refreshed(run).status == Run.Status.RUNNING
        os.killpg(paused.pid, signal.SIGCONT)
        wait_for(lambda: progress(client, run)["silent_seconds"] is None, timeout=30, what="the heartbeat again")
        paused_at = refreshed(run).step
        wait_for(lambda: refreshed(run).step > paused_at, timeout=60, what="the woken supervisor to ingest on")
        run_cancel(run=run)  # the same attempt trained on and is still its supervisor's: it obeys
        wait_for(lambda: refreshed(run).is_finished, timeout=60, what="the run to stop")
        assert run.status == Run.Status.CANCELLED and run.attempt == 1, run.error
        steps = list(StepMetric.objects.filter(run=run).values_list("step", flat=True))
        assert steps == list(range(1, len(steps) + 1))  # every step stored once, none skipped
        # the step counter may be one ahead: the step in progress when cancelled had its rollout batch, not its metrics
        assert run.step - len(steps) in (0, 1), (run.step, len(steps))
    finally:
        os.killpg(paused.pid, signal.SIGCONT)
        stop_process(paused)


def _restart_redis():
    """Stop the Redis the suite uses and start it again empty (it keeps nothing on disk)."""
    import redis

    if settings.REDIS_EMBEDDED:
        from grpo_web.embedded import ensure_redis

        sock = str(settings.DATA_DIR / "redis.sock")
        subprocess.run(["redis-cli", "-s", sock, "shutdown", "nosave"], capture_output=True) if shutil.which(
            "redis-cli"
        ) else redis.Redis(unix_socket_path=sock).shutdown(nosave=True)
        time.sleep(1)
        ensure_redis(settings.DATA_DIR)
        return
    url = redis.Redis.from_url(settings.REDIS_URL).connection_pool.connection_kwargs
    host, port = url.get("host"), url.get("port", 6379)
    if host not in ("127.0.0.1", "localhost") or not shutil.which("redis-server"):
        pytest.skip(f"cannot restart the Redis at {settings.REDIS_URL} from here")
    try:
        redis.Redis(host=host, port=port).shutdown(nosave=True)
    except redis.ConnectionError:
        pass  # shutdown closes the connection it came on
    time.sleep(1)
    os.makedirs("/var/lib/redis", exist_ok=True)
    subprocess.run(
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            "/var/lib/redis",
        ],
        check=True,
    )
    wait_for(lambda: _pings(host, port), timeout=10, what="Redis to come back")


def _pings(host, port) -> bool:
    import redis

    try:
        return redis.Redis(host=host, port=port, socket_connect_timeout=0.5).ping()
    except redis.RedisError:
        return False


def test_restarting_redis_mid_run_does_not_stop_the_run(celery_worker, owner, dataset_version):
    run = submit(owner, dataset_version, max_steps=16)
    wait_for(lambda: refreshed(run).step >= 3, timeout=120, what="a few steps")
    _restart_redis()
    wait_for(lambda: refreshed(run).is_finished, timeout=180, what="the run to finish")
    assert run.status == Run.Status.COMPLETED, run.error
    assert_complete_and_unique(run, steps=16)
    # and the worker is back on the new Redis: the next run goes through
    again = submit(owner, dataset_version, max_steps=2)
    wait_for(lambda: refreshed(again).is_finished, timeout=180, what="a run after the restart")
    assert again.status == Run.Status.COMPLETED


def _postgres_cluster() -> list[str] | None:
    if connection.vendor != "postgresql" or not shutil.which("pg_ctlcluster") or not os.path.isdir("/etc/postgresql"):
        return None
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    return ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main"]


def test_stopping_postgresql_for_a_few_seconds_mid_run_loses_nothing(celery_worker, owner, dataset_version):
    cluster = _postgres_cluster()
    if cluster is None:
        pytest.skip("needs the suite on a local PostgreSQL cluster (DATABASE_URL=postgres://...@127.0.0.1)")
    run = submit(owner, dataset_version, max_steps=16)
    wait_for(lambda: refreshed(run).step >= 3, timeout=120, what="a few steps")
    connection.close()
    subprocess.run(cluster + ["stop", "-m", "fast"], check=True)
    try:
        time.sleep(4)  # training goes on; the event log keeps every step
    finally:
        subprocess.run(cluster + ["start"], check=True)
    wait_for(lambda: _db_up(), timeout=30, what="PostgreSQL to accept connections")
    wait_for(lambda: refreshed(run).is_finished, timeout=180, what="the run to finish")
    assert run.status == Run.Status.COMPLETED, run.error
    assert_complete_and_unique(run, steps=16)


def _db_up() -> bool:
    from django.db import OperationalError

    try:
        connection.close()
        connection.ensure_connection()
        return True
    except OperationalError:
        return False
