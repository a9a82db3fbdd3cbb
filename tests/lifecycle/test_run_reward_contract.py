"""Rewards are checked in the sandbox before a run is queued (the Start answers at once: the run is "checking", then
queued or failed with its refusal); one that faults during a run is disabled, visibly."""

import re

import pytest
from django.urls import reverse

from rewards.models import RewardFunction
from rewards.services import reward_create
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Run
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

CONFIG = {
    "num_generations": 4,
    "max_completion_length": 8,
    "learning_rate": 1e-2,
    "beta": 0.0,
    "epsilon": 0.2,
    "temperature": 1.0,
    "max_steps": 5,
    "per_device_train_batch_size": 8,
    "seed": 3,
    "loss_type": "dapo",
    "scale_rewards": "group",
    "log_completions": False,
}


def _pinned(rf, weight=1.0):
    return {"name": rf.name, "weight": weight, "version_id": rf.latest_version.pk}


def refused(run: Run) -> str:
    """The run, answered at once as "checking", once the checks worker has refused it: its refusal as one text."""
    assert run.status == Run.Status.CHECKING
    wait_for(lambda: run.refresh_from_db() or run.status != Run.Status.CHECKING, timeout=120, what="the check")
    assert run.status == Run.Status.FAILED and run.refusal, (run.status, run.error)
    assert run.started_at is None and not run.rollouts.exists()  # nothing trained
    assert run.error.startswith("Refused before it was queued")
    return "\n".join(run.refusal)


def test_a_reward_returning_the_wrong_length_is_refused_before_the_run(celery_worker, owner, dataset_version):
    bad = reward_create(
        owner=owner, name="short", entrypoint="short", source_code="def short(completions, **kw):\n    return [1.0]\n"
    )
    run = run_create(
        owner=owner,
        spec=RunSpec(name="r", model="tiny", dataset_version=dataset_version, rewards=[_pinned(bad)], config=CONFIG),
    )
    text = refused(run)
    assert "reward 'short'" in text and "InvalidResult" in text


def test_trls_own_start_up_checks_are_made_before_the_run_is_queued(celery_worker, owner, dataset_version):
    """A combination only TRL's GRPOConfig refuses (grpo-web's own checks let it through): its message, naming the
    fields, comes back before anything is queued."""
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="r",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[_pinned(digits)],
            config={**CONFIG, "steps_per_generation": 2},
            config_extra={"generation_batch_size": 16},
        ),
    )
    text = refused(run)
    assert "GRPOConfig refuses this configuration" in text
    assert "'generation_batch_size' and 'steps_per_generation' can not be both configured" in text


def test_a_reward_needing_a_missing_column_is_refused(celery_worker, owner, dataset_version):
    letter_count = RewardFunction.objects.get(owner=owner, name="letter_count")
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="r", model="tiny", dataset_version=dataset_version, rewards=[_pinned(letter_count)], config=CONFIG
        ),
    )
    assert re.search(r"reward 'letter_count'.*word", refused(run))


def test_a_reward_that_faults_during_training_is_disabled_and_shown(
    celery_worker, owner, dataset_version, owner_client
):
    # fine at the contract check (global_step 0), then fails from the second step on
    flaky = reward_create(
        owner=owner,
        name="flaky",
        entrypoint="flaky",
        source_code=(
            "def flaky(completions, trainer_state=None, **kw):\n"
            "    if trainer_state.global_step >= 1:\n"
            "        raise RuntimeError('broke at step %d' % trainer_state.global_step)\n"
            "    return [0.5 for _ in completions]\n"
        ),
    )
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="flaky run",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[_pinned(digits), _pinned(flaky)],
            config=CONFIG,
        ),
    )
    wait_for(lambda: run.refresh_from_db() or run.is_finished, timeout=180, what="the run to finish")
    assert run.status == Run.Status.COMPLETED, run.error
    fault = run.reward_faults["flaky"]
    assert fault["faults"] == 3 and fault["disabled"] is True
    assert "RuntimeError at line 3: broke at step" in fault["error"]
    page = owner_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "flaky" in page and "disabled after 3 faults" in page and "broke at step" in page
