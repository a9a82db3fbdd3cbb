"""A model is checked when a run or job is queued and again when it starts: a run queued from another user's shared
run whose share is taken away before a worker picks it up is refused at start, with the reason, and never trains
from those weights; so is a rejection-sampling job, a recipe's stage, and a standalone evaluation (of another user's
shared model, or of a run shared for writing)."""

import io
import json
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from rewards.models import RewardFunction
from runs.datasets.services import dataset_import
from runs.evaluations.services import evaluation_create
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Evaluation, Recipe, RejectionJob, Run, RunShare
from runs.paths import NOT_YOURS
from runs.recipes.services import recipe_advance, recipe_create, recipe_start
from runs.sampling.services import RejectionSettings, rejection_job_create
from tests.conftest import wait_for
from workers.jobs import run_evaluation, run_rejection_job
from workers.supervisor import supervise
from workers.training.coldstart import cold_start_rows

# the worker's own code, called as its Celery task calls it; committed, as a worker sees the rows. The share is taken
# away in the transaction that queues the run, so its message (were a worker listening) finds it gone too.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shared_output(owner, member, dataset_version) -> tuple[str, RunShare]:
    """The owner's finished run, its final model on disk, shared with the member's team: (its folder, the share)."""
    run = Run.objects.create(
        owner=owner,
        name="theirs",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "builtin": "digit_ratio"}],
        config={"max_steps": 2},
        total_steps=2,
        status=Run.Status.COMPLETED,
    )
    final = Path(run.run_dir) / "output" / "final"
    final.mkdir(parents=True)
    (final / "config.json").write_text("{}")
    (final / "model.safetensors").write_text("weights")
    team = Group.objects.create(name="team")
    team.user_set.add(owner, member)
    return str(final), RunShare.objects.create(run=run, team=team)


def _worked(user):
    data = "".join(json.dumps(r) + "\n" for r in cold_start_rows(8)).encode()
    return dataset_import(owner=user, name="worked", stream=io.BytesIO(data), source_name="w.jsonl")


def _ended(row):
    """The row once it has left queued and running (a worker listening on the test's broker may be the one to
    take it: the claim lets one start it)."""
    return wait_for(
        lambda: (fresh := type(row).objects.get(pk=row.pk)).status not in ("queued", "running") and fresh,
        timeout=60,
        what=f"{row} to end",
    )


def _refused(error: str) -> bool:
    return NOT_YOURS in error and "checked again as it started" in error


def test_a_run_queued_from_a_shared_model_is_refused_at_start_once_unshared(member, shared_output):
    model, share = shared_output
    spec = RunSpec(
        name="borrowed", model=model, kind="sft", dataset_version=_worked(member), rewards=[], config={"max_steps": 2}
    )
    with transaction.atomic():
        run = run_create(owner=member, spec=spec, queue_anyway=True)
        assert run.status == Run.Status.QUEUED
        share.delete()

    supervise(run.pk, "test-worker")
    run = _ended(run)
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("could not start training: ") and _refused(run.error), run.error
    assert not list(run.run_dir.glob("train_config-*.json"))  # no training program was given the model


def test_a_rejection_job_queued_from_a_shared_model_is_refused_at_start_once_unshared(member, shared_output):
    model, share = shared_output
    accuracy = RewardFunction.objects.get(owner=member, name="accuracy").latest_version
    with transaction.atomic():
        job = rejection_job_create(
            owner=member,
            name="kept",
            model=model,
            dataset_version=_worked(member),
            rewards=[{"name": "accuracy", "weight": 1.0, "version_id": accuracy.pk, "version": accuracy.number}],
            settings=RejectionSettings(k=2),
        )
        share.delete()

    run_rejection_job(job.pk)
    job = _ended(job)
    assert job.status == RejectionJob.Status.FAILED and _refused(job.error), job.error
    assert not (job.job_dir / "sample_config.json").exists()


def test_a_recipe_stage_whose_model_is_unshared_after_it_was_queued_fails_the_recipe(member, shared_output):
    model, share = shared_output
    recipe = recipe_create(
        owner=member,
        name="borrowed",
        stages=[
            {"kind": "sft", "name": "t", "model": model, "dataset": _worked(member).pk, "config": {"max_steps": 2}}
        ],
    )
    with transaction.atomic():
        recipe = recipe_start(recipe=recipe)
        run = Run.objects.get(pk=recipe.outputs[0]["run"])
        share.delete()

    supervise(run.pk, "test-worker")
    _ended(run)
    recipe = recipe_advance(recipe_id=recipe.pk) or Recipe.objects.get(pk=recipe.pk)
    assert recipe.status == Recipe.Status.FAILED
    assert recipe.error.startswith("stage 1 failed: could not start training: ") and _refused(recipe.error)


def _mine(member) -> Run:
    """The member's own finished run, with a reward to score an evaluation."""
    return Run.objects.create(
        owner=member,
        name="mine",
        model="tiny",
        dataset_version=_worked(member),
        rewards=[{"name": "digit_ratio", "weight": 1.0, "builtin": "digit_ratio"}],
        config={"max_steps": 2},
        total_steps=2,
        status=Run.Status.COMPLETED,
    )


def test_an_evaluation_queued_of_a_shared_model_is_refused_at_start_once_unshared(member, shared_output):
    model, share = shared_output
    mine = _mine(member)
    with transaction.atomic():
        evaluation = evaluation_create(
            run=mine, user=member, model="path", model_path=model, dataset_version=mine.dataset_version, split="all"
        )
        assert evaluation.status == Evaluation.Status.QUEUED and evaluation.model == model
        share.delete()

    run_evaluation(evaluation.pk)
    evaluation = _ended(evaluation)
    assert evaluation.status == Evaluation.Status.FAILED and _refused(evaluation.error), evaluation.error
    assert not (evaluation.eval_dir / "eval_config.json").exists()  # no evaluation program was given the model


def test_an_evaluation_queued_of_a_run_shared_for_writing_is_refused_at_start_once_unshared(member, shared_output):
    _, share = shared_output
    share.can_write = True  # the member may evaluate the owner's run, as its page lets them
    share.save(update_fields=["can_write"])
    theirs = share.run
    with transaction.atomic():
        evaluation = evaluation_create(
            run=theirs, user=member, model="final", dataset_version=theirs.dataset_version, split="all"
        )
        assert evaluation.status == Evaluation.Status.QUEUED and evaluation.requested_by == member
        share.delete()

    run_evaluation(evaluation.pk)
    evaluation = _ended(evaluation)
    assert evaluation.status == Evaluation.Status.FAILED, evaluation.error
    assert "not yours to evaluate (checked again as it started" in evaluation.error, evaluation.error
    assert not (evaluation.eval_dir / "eval_config.json").exists()
