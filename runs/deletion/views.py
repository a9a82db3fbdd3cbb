"""The delete pages: GET shows what a delete removes (rows, rollouts, folders) or why it is refused; POST, with the
page's CSRF token, deletes. Only the owner reaches them: anyone else gets 404, as for any object not theirs."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from grpo_web.removal import DeleteRefused
from rewards.models import RewardFunction
from rewards.services import reward_function_delete, reward_function_removal
from runs.deletion import selectors
from runs.deletion.services import dataset_delete, model_delete, run_delete
from runs.models import Dataset, Run
from runs.registry.selectors import run_models


def _confirm(request, *, removal, delete, back: str, done: str):
    """The confirmation page of ``removal``; on POST, ``delete()`` and on to ``done``, or the page again with the
    reasons it was refused (409)."""
    if request.method == "POST":
        try:
            delete()
        except DeleteRefused as exc:
            removal.refusals = exc.reasons
        else:
            messages.success(request, f"Deleted {removal.label}.")
            return redirect(done)
    return render(
        request,
        "deletion/confirm.html",
        {"removal": removal, "back": back, "data_dir": settings.DATA_DIR},
        status=409 if removal.refusals and request.method == "POST" else 200,
    )


@require_http_methods(["GET", "POST"])
def run_delete_view(request, pk):
    run = get_object_or_404(Run, pk=pk, owner=request.user)
    return _confirm(
        request,
        removal=selectors.run_removal(run),
        delete=lambda: run_delete(run=run, user=request.user),
        back=run.get_absolute_url(),
        done=reverse("dashboard"),
    )


@require_http_methods(["GET", "POST"])
def dataset_delete_view(request, pk):
    dataset = get_object_or_404(Dataset, pk=pk, owner=request.user)
    return _confirm(
        request,
        removal=selectors.dataset_removal(dataset),
        delete=lambda: dataset_delete(dataset=dataset, user=request.user),
        back=dataset.get_absolute_url(),
        done=reverse("dashboard"),
    )


@require_http_methods(["GET", "POST"])
def reward_delete_view(request, pk):
    function = get_object_or_404(RewardFunction, pk=pk, owner=request.user)
    return _confirm(
        request,
        removal=reward_function_removal(function=function),
        delete=lambda: reward_function_delete(function=function, user=request.user),
        back=function.get_absolute_url(),
        done=reverse("dashboard"),
    )


@require_http_methods(["GET", "POST"])
def model_delete_view(request, run_id, key):
    run = get_object_or_404(Run, pk=run_id, owner=request.user)
    if key not in run_models(run):
        raise Http404("no such model")
    return _confirm(
        request,
        removal=selectors.model_removal(run, key),
        delete=lambda: model_delete(run=run, key=key, user=request.user),
        back=reverse("models"),
        done=reverse("models"),
    )
