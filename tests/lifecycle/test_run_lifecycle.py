"""A run's life with a real worker: cancel within seconds, checkpoints, resume after a crash, retry, routing."""

import os
import signal
import time

import pytest

from rewards.models import RewardFunction
from runs.lifecycle.services import RunRefused, run_cancel, run_create, run_resume, run_retry
from runs.lifecycle.spec import RunSpec
from runs.models import Rollout, Run, StepMetric
from runs.paths import event_log_path
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

CONFIG = {
    "num_generations": 4,
    "max_completion_length": 8,
    "per_device_train_batch_size": 8,
    "seed": 11,
    "save_steps": 3,
}


def submit(owner, dataset_version, max_steps=12, requested_gpus=0, **extra):
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    return run_create(
        owner=owner,
        spec=RunSpec(
            name="life",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk, "version": 1}],
            config={**CONFIG, "max_steps": max_steps, **extra},
            requested_gpus=requested_gpus,
        ),
    )


def refreshed(run):
    run.refresh_from_db()
    return run


def training_pid(run) -> int | None:
    """The training process of this run, found by its config file on the command line."""
    needle = f"train_config-{run.attempt}.json".encode()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    cmd = fh.read()
            except OSError:
                continue
            if needle in cmd and b"workers.training.train" in cmd and str(run.run_dir).encode() in cmd:
                return int(pid)
    return None


def assert_complete_and_unique(run, steps, per_step=8):
    keys = list(Rollout.objects.filter(run=run).values_list("step", "index"))
    from collections import Counter

    assert len(keys) == len(set(keys)) == steps * per_step, Counter(step for step, _ in keys)
    assert sorted(keys) == [(s, i) for s in range(1, steps + 1) for i in range(per_step)]
    assert sorted(StepMetric.objects.filter(run=run).values_list("step", flat=True)) == list(range(1, steps + 1))


def test_cancel_stops_training_within_five_seconds_and_keeps_what_was_ingested(celery_worker, owner, dataset_version):
    run = submit(owner, dataset_version, max_steps=2000)
    wait_for(lambda: refreshed(run).step >= 3, timeout=120, what="a few steps")
    pid = training_pid(run)
    assert pid is not None
    stored = Rollout.objects.filter(run=run).count()
    run_cancel(run=run)
    started = time.monotonic()
    wait_for(lambda: refreshed(run).status == Run.Status.CANCELLED, timeout=5, what="the run to be cancelled")
    wait_for(
        lambda: not os.path.exists(f"/proc/{pid}") or _zombie(pid),
        timeout=max(0.1, 5 - (time.monotonic() - started)),
        what="the training process to exit",
    )
    assert Rollout.objects.filter(run=run).count() >= stored > 0
    assert run.step < 2000


def _zombie(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_a_queued_run_is_cancelled_at_once(owner, dataset_version):
    run = Run.objects.create(
        owner=owner, name="q", model="tiny", dataset_version=dataset_version, rewards=[], config=CONFIG, total_steps=5
    )
    assert run_cancel(run=run).status == Run.Status.CANCELLED


def test_killing_the_training_process_fails_the_run_and_resume_completes_it(celery_worker, owner, dataset_version):
    run = submit(owner, dataset_version, max_steps=40)
    wait_for(lambda: refreshed(run).checkpoint_step >= 3 and run.step >= 4, timeout=120, what="a checkpoint")
    os.kill(training_pid(run), signal.SIGKILL)
    wait_for(lambda: refreshed(run).status == Run.Status.FAILED, timeout=30, what="the run to fail")
    assert run.resumable and "-9" in run.error and run.checkpoint_step >= 3
    checkpoint = run.checkpoint_step

    run_resume(run=run)
    wait_for(lambda: refreshed(run).is_finished, timeout=180, what="the resumed run to finish")
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.attempt == 2 and run.step == 40
    assert_complete_and_unique(run, steps=40)
    # the resumed attempt started at the checkpoint: its event log holds only the steps after it
    import json

    resumed = [
        json.loads(line)["step"]
        for line in event_log_path(run).read_text().splitlines()
        if '"type": "rollouts"' in line
    ]
    assert resumed[0] == checkpoint + 1


def test_resume_is_refused_without_a_checkpoint(owner, dataset_version):
    run = Run.objects.create(
        owner=owner,
        name="f",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config=CONFIG,
        total_steps=5,
        status=Run.Status.FAILED,
    )
    with pytest.raises(RunRefused, match="checkpoint"):
        run_resume(run=run)


def test_retry_runs_the_same_setup_from_scratch_as_a_new_run(celery_worker, owner, dataset_version):
    first = submit(owner, dataset_version, max_steps=2)
    wait_for(lambda: refreshed(first).is_finished, timeout=120, what="the first run")
    again = run_retry(run=first)
    assert again.pk != first.pk and again.parent == first
    assert (again.config, again.rewards, again.dataset_version) == (first.config, first.rewards, first.dataset_version)
    wait_for(lambda: refreshed(again).is_finished, timeout=120, what="the retry")
    assert again.status == Run.Status.COMPLETED
    assert_complete_and_unique(again, steps=2)


def test_a_run_needing_a_gpu_waits_for_a_gpu_worker(celery_worker, owner, dataset_version):
    from grpo_web.queues import training_queue

    assert [training_queue(n) for n in (0, 1, 4)] == ["training", "training-gpu1", "training-gpu4"]
    run = submit(owner, dataset_version, max_steps=2, requested_gpus=0)
    run = Run.objects.get(pk=run.pk)
    gpu_run = run_create(
        owner=owner,
        spec=RunSpec(
            name="gpu",
            model="tiny",
            dataset_version=dataset_version,
            rewards=run.rewards,
            config=run.config,
            requested_gpus=1,
        ),
        queue_anyway=True,
    )  # no GPU worker is up
    wait_for(lambda: refreshed(run).is_finished, timeout=120, what="the CPU run")
    time.sleep(1)
    assert refreshed(gpu_run).status == Run.Status.QUEUED  # the CPU-only worker does not take it
    run_cancel(run=gpu_run)


def test_the_worker_announced_itself(celery_worker, owner_client):
    from runs.models import Worker

    worker = wait_for(
        lambda: Worker.objects.filter(name__startswith="test-").first(), timeout=30, what="the worker row"
    )
    assert "training" in worker.queues and "sandbox" in worker.queues
    page = owner_client.get("/workers/").content.decode()
    assert worker.name in page and "online" in page
