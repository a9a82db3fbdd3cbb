"""The JSON API's deletes that have no object router of their own: a model a run made (grpo_web/api.py mounts this
router at /api/). Runs, datasets and reward functions are deleted by DELETE on their own paths, in their routers."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from ninja import Router

from grpo_web.removal import delete_answer
from runs.apischemas import Errors
from runs.deletion.services import model_delete
from runs.models import Run
from runs.registry.selectors import run_models

router = Router()


@router.delete(
    "/models/{int:run_id}/{key}",
    response={204: None, 409: Errors},
    tags=["models"],
    summary="Delete a model one of your finished runs made (final or checkpoint-N); 409: the runs that start from it",
)
def model_delete_api(request, run_id: int, key: str):
    run = get_object_or_404(Run, pk=run_id, owner=request.user)
    if key not in run_models(run):
        raise Http404("no such model")
    return delete_answer(lambda: model_delete(run=run, key=key, user=request.user))
