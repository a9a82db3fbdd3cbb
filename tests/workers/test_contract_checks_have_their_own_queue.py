"""The contract check a Start waits for (issue 44, item 3) goes to a queue of its own, "checks", served by a worker
of its own (the demo's, docker-compose's worker-checks): it never waits behind a reward test, a replay or an import on
the sandbox and default queues, and it runs on sandbox slots of its own, so the two workers of one machine (both
Celery pool index 0) never share a sandbox uid or scratch folder."""

import os
import socket

import pytest

from grpo_web import queues
from rewards.models import RewardFunction
from rewards.services import reward_create
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Run
from tests.conftest import start_worker, stop_process, wait_for
from tests.lifecycle.test_run_reward_contract import CONFIG

pytestmark = [pytest.mark.django_db(transaction=True)]


def _spec(rf, dataset_version) -> RunSpec:
    return RunSpec(
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": rf.name, "weight": 1.0, "version_id": rf.latest_version.pk}],
        config=CONFIG,
    )


def _reward(owner) -> RewardFunction:
    return reward_create(
        owner=owner,
        name="half",
        entrypoint="half",
        source_code="def half(completions, **kw):\n    return [0.5 for _ in completions]\n",
    )


def test_a_checks_worker_alone_checks_the_run_and_queues_it(
    service_env, checks_queue, tiny_model, owner, dataset_version, tmp_path
):
    """Only a worker of the checks queue is up (no sandbox or default queue served): the run is checked and queued."""
    rf = _reward(owner)
    name = f"checks-{os.getpid()}@{socket.gethostname()}"
    worker = start_worker({**service_env, "GRPO_CHECKS_QUEUE": checks_queue}, name, checks_queue, tmp_path / "w.log")
    try:
        run = run_create(owner=owner, spec=_spec(rf, dataset_version))
        assert run.status == Run.Status.CHECKING  # answered at once
        wait_for(lambda: run.refresh_from_db() or run.status != Run.Status.CHECKING, timeout=120, what="the check")
    finally:
        stop_process(worker)
    # queued (a training worker of the session may have taken it since): never refused
    assert run.refusal == [] and run.queued_at is not None and run.status != Run.Status.FAILED


def test_a_sandbox_worker_leaves_the_check_to_the_checks_queue(
    service_env, checks_queue, tiny_model, owner, dataset_version, tmp_path
):
    """An idle worker of the sandbox and default queues does not take the check: the run stays "checking", its check
    waiting where only a checks worker takes it (the run page says to start one)."""
    rf = _reward(owner)
    name = f"sandbox-{os.getpid()}@{socket.gethostname()}"
    worker = start_worker(service_env, name, "sandbox,default", tmp_path / "w.log")
    try:
        run = run_create(owner=owner, spec=_spec(rf, dataset_version))
        # the sandbox worker answers an editor's Test meanwhile: it is up, and it is not taking the check
        tested = queues.enqueue(
            queues.REWARD_TEST,
            kwargs={
                "owner_id": owner.pk,
                "function_id": rf.pk,
                "source": rf.latest_version.source,
                "entrypoint": "half",
                "dataset_version_id": dataset_version.pk,
                "rows": 2,
                "completions": ["x"],
            },
        ).get(timeout=120)
    finally:
        stop_process(worker)
    assert [row["score"] for row in tested["rows"]] == [0.5, 0.5]
    run.refresh_from_db()
    assert run.status == Run.Status.CHECKING
    assert _purge(checks_queue) == 1  # the check, left where only a checks worker would take it


def test_the_checks_and_the_sandbox_queue_use_different_sandbox_slots(monkeypatch):
    """Pool processes 0..15 of a checks worker and of a sandbox worker on one machine, and a training worker's runs
    (from 100): no slot in common."""
    from workers import placement, reward_checks

    runs_first = placement.slot_base()  # pool process 0's runs: the lowest slot a training worker's runs take
    taken = {"sandbox": set(), "checks": set()}
    for index in range(16):
        monkeypatch.setattr(reward_checks, "current_process", lambda index=index: type("P", (), {"index": index})())
        taken["sandbox"].add(reward_checks.sandbox_slot())
        taken["checks"].add(reward_checks.check_slot())
    assert len(taken["sandbox"]) == len(taken["checks"]) == 16
    assert not taken["sandbox"] & taken["checks"]
    assert max(taken["sandbox"] | taken["checks"]) < runs_first


def _purge(queue: str) -> int:
    """Drop what waits on ``queue`` (so no later test's worker takes it); how many messages that was."""
    from celery import current_app

    with current_app.connection_for_write() as connection:
        return connection.default_channel.queue_purge(queue) or 0
