"""Deletes of what a user owns: a run, a dataset, a model a run made. Each checks its plan (runs.deletion.selectors)
again under a row lock, deletes the rows, and removes the files once the transaction has committed (a rolled back
delete leaves the files too). Only the owner deletes: a team that shares an object, even for writing, does not.

Reward functions are deleted by rewards.services.reward_function_delete, which asks runs (reward_version_users)
which runs pin them."""

from __future__ import annotations

from django.db import transaction

from grpo_web.removal import Removal, remove_paths
from runs.deletion.selectors import dataset_removal, model_removal, resumes_from, run_removal
from runs.models import Dataset, Run
from runs.registry.selectors import run_models


def _owner_only(obj, user) -> None:
    if obj.owner_id != user.pk:
        raise PermissionError("only the owner deletes it")


def run_delete(*, run: Run, user) -> Removal:
    """Delete a finished run: its rollouts, metrics, evaluations, replays and shares, and its folder (events, logs,
    checkpoints, final model). DeleteRefused while it is queued or running, or while another run starts from a model
    it made."""
    _owner_only(run, user)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        removal = run_removal(run)
        removal.check()
        run.delete()
        transaction.on_commit(lambda: remove_paths(removal.paths))
    return removal


def dataset_delete(*, dataset: Dataset, user) -> Removal:
    """Delete a dataset with all its versions, import records, shares and rows files. DeleteRefused while any version
    is the data of a run (anyone's), of an evaluation or of a rejection-sampling job, or an import is under way."""
    _owner_only(dataset, user)
    with transaction.atomic():
        dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
        removal = dataset_removal(dataset)
        removal.check()
        dataset.delete()
        transaction.on_commit(lambda: remove_paths(removal.paths))
    return removal


def model_delete(*, run: Run, key: str, user) -> Removal:
    """Delete one model a finished run made ("final" or "checkpoint-N"): its folder under the run's output. The run
    and its records stay; deleting the checkpoint it would resume from ends its resumability. DeleteRefused while the
    run trains or a run starts from that model."""
    _owner_only(run, user)
    if key not in run_models(run):
        raise LookupError(f"run {run.pk} has no model {key}")
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        removal = model_removal(run, key)
        removal.check()
        if resumes_from(run, key):
            run.resumable = False
            run.save(update_fields=["resumable"])
        transaction.on_commit(lambda: remove_paths(removal.paths))
    return removal
