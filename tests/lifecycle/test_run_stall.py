"""A running run with no new step for max(10 x its median step time, GRPO_STALL_SECONDS) is shown as stalled, with
no ETA; it clears by itself when steps come again."""

import os
import signal
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.lifecycle.selectors import run_pace
from runs.lifecycle.services import run_cancel
from runs.models import Run, StepMetric
from tests.conftest import wait_for
from tests.lifecycle.test_run_lifecycle import refreshed, submit, training_pid

T0 = timezone.now() - timedelta(hours=1)


def log_steps(run, seconds_apart: float, steps: int, start=T0):
    for step in range(1, steps + 1):
        StepMetric.objects.create(
            run=run, step=step, metrics={"reward": 0.1}, logged_at=start + timedelta(seconds=step * seconds_apart)
        )
    run.step = steps
    run.save(update_fields=["step"])
    return start + timedelta(seconds=steps * seconds_apart)


@pytest.fixture
def running(owner, dataset_version):
    return Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config={"max_steps": 100},
        total_steps=100,
        status=Run.Status.RUNNING,
        started_at=T0,
    )


@pytest.mark.django_db
def test_a_run_whose_steps_stop_coming_is_stalled_after_ten_median_steps(running, settings):
    settings.GRPO_STALL_SECONDS = 5
    last = log_steps(running, seconds_apart=2.0, steps=10)
    fine = run_pace(running, now=last + timedelta(seconds=19))
    assert fine.stalled_seconds is None and fine.eta_seconds == pytest.approx(90 * 2.0)
    stalled = run_pace(running, now=last + timedelta(seconds=21))
    assert stalled.stalled_seconds == pytest.approx(21) and stalled.stall_limit_seconds == pytest.approx(20)
    assert stalled.eta_seconds is None  # no promise from a pace that stopped


@pytest.mark.django_db
def test_the_setting_is_the_least_a_stall_takes(running, settings):
    settings.GRPO_STALL_SECONDS = 60
    last = log_steps(running, seconds_apart=0.5, steps=10)
    assert run_pace(running, now=last + timedelta(seconds=30)).stalled_seconds is None
    assert run_pace(running, now=last + timedelta(seconds=61)).stalled_seconds == pytest.approx(61)


@pytest.mark.django_db
def test_a_resumed_run_counts_from_its_new_start_not_its_old_steps(running, settings):
    settings.GRPO_STALL_SECONDS = 5
    log_steps(running, seconds_apart=1.0, steps=10)
    running.started_at = timezone.now() - timedelta(seconds=2)  # attempt 2 just started
    running.save(update_fields=["started_at"])
    assert run_pace(running).stalled_seconds is None


@pytest.mark.django_db
def test_a_finished_run_is_never_stalled(running, settings):
    settings.GRPO_STALL_SECONDS = 1
    log_steps(running, seconds_apart=1.0, steps=10)
    running.mark_completed()
    assert run_pace(running).stalled_seconds is None


@pytest.mark.django_db(transaction=True)
def test_a_stopped_trainer_shows_stalled_and_recovers_when_it_goes_on(
    celery_worker, owner, owner_client, dataset_version, settings
):
    settings.GRPO_STALL_SECONDS = 1  # the tiny model's ten median steps decide
    run = submit(owner, dataset_version, max_steps=3000)
    url = reverse("run_progress_json", args=[run.pk])
    wait_for(lambda: refreshed(run).step >= 5, timeout=120, what="a few steps")
    pid = training_pid(run)
    os.kill(pid, signal.SIGSTOP)
    try:
        progress = wait_for(
            lambda: (p := owner_client.get(url).json())["stalled_seconds"] and p,
            timeout=60,
            what="the run to show as stalled",
        )
        assert progress["status"] == "running" and progress["eta_seconds"] is None
        stopped_at = refreshed(run).step
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(
        lambda: refreshed(run).step > stopped_at + 2 and owner_client.get(url).json()["stalled_seconds"] is None,
        timeout=60,
        what="the stall to clear once steps come again",
    )
    run_cancel(run=run)
    wait_for(lambda: refreshed(run).is_finished, timeout=30, what="the run to be cancelled")
