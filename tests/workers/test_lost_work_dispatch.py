"""The database is the source of truth for queued work: what the broker lost is sent again, and nothing trains twice."""

from datetime import timedelta

import pytest
from django.utils import timezone

from grpo_web import queues
from runs.lifecycle.services import run_create, run_redispatch
from runs.lifecycle.spec import RunSpec
from runs.models import Run
from tests.conftest import start_worker, stop_process, wait_for
from tests.lifecycle.test_run_lifecycle import assert_complete_and_unique, refreshed
from tests.workers.test_run_fault_injection import _restart_redis

QUEUE = "training-gpu1"  # no worker of the suite serves it: a run sent there waits in the broker
BUILTIN = [{"name": "digit_ratio", "weight": 1.0, "version_id": None, "builtin": "digit_ratio"}]
CONFIG = {
    "num_generations": 4,
    "max_completion_length": 8,
    "per_device_train_batch_size": 8,
    "seed": 11,
    "max_steps": 3,
}


def queued_run(owner, dataset_version, minutes_ago: float = 5) -> Run:
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="waiting",
            model="tiny",
            dataset_version=dataset_version,
            rewards=BUILTIN,
            config=CONFIG,
            requested_gpus=1,
        ),
        queue_anyway=True,
    )
    Run.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(minutes=minutes_ago))
    return run


def forget_in_broker(run_id: int) -> None:
    """Remove the run's message from the broker, as a Redis restarted without its data would."""
    with queues.current_app.connection_for_write() as connection:
        client = connection.default_channel.client
        for raw in client.lrange(QUEUE, 0, -1):
            if f'"argsrepr": "[{run_id}]"'.encode() in raw or f"'argsrepr': '[{run_id}]'".encode() in raw:
                client.lrem(QUEUE, 0, raw)


@pytest.mark.django_db(transaction=True)
def test_a_run_the_broker_still_holds_is_not_sent_again(owner, dataset_version):
    run = queued_run(owner, dataset_version)
    try:
        assert run.pk in queues.pending(queues.TRAIN_RUN)
        assert run_redispatch() == []
    finally:
        forget_in_broker(run.pk)


@pytest.mark.django_db(transaction=True)
def test_a_run_the_broker_lost_is_sent_again_once(owner, dataset_version):
    run = queued_run(owner, dataset_version)
    forget_in_broker(run.pk)
    assert run.pk not in queues.pending(queues.TRAIN_RUN)
    assert [r.pk for r in run_redispatch()] == [run.pk]
    assert run.pk in queues.pending(queues.TRAIN_RUN)
    assert run_redispatch() == []  # now held again: not a second message
    forget_in_broker(run.pk)


@pytest.mark.django_db(transaction=True)
def test_a_run_queued_a_moment_ago_is_left_to_its_own_message(owner, dataset_version):
    run = queued_run(owner, dataset_version, minutes_ago=0)
    forget_in_broker(run.pk)
    assert run_redispatch(grace_seconds=30) == []


@pytest.mark.django_db(transaction=True)
def test_redis_restarted_while_a_run_is_queued_then_it_trains_exactly_once(
    service_env, tiny_model, owner, dataset_version, tmp_path
):
    run = queued_run(owner, dataset_version)
    _restart_redis()  # the suite's Redis keeps nothing: the message is gone (the embedded one replays its file)
    forget_in_broker(run.pk)
    assert run.pk not in queues.pending(queues.TRAIN_RUN)
    # the dispatcher of whichever worker beats first (this one at its start, or the suite's) sends it again
    worker = start_worker(
        {**service_env, "GRPO_WORKER_BEAT": "1"}, "dispatch-test@host", QUEUE, tmp_path / "worker.log"
    )
    try:
        wait_for(lambda: refreshed(run).is_finished, timeout=180, what="the lost run to be sent again and train")
        assert run.status == Run.Status.COMPLETED and run.attempt == 1, run.error
        assert_complete_and_unique(run, steps=3)
    finally:
        stop_process(worker)
    assert run.pk not in queues.pending(queues.TRAIN_RUN)  # no second message left behind for it
