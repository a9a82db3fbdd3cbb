"""The JSON API over a run's evaluations: read them, queue a standalone one (grpo_web/api.py mounts this router at
/api/)."""

from __future__ import annotations

from django.urls import reverse
from ninja import Router, Schema, Status
from pydantic import Field

from runs.access import visible_run, writable_run
from runs.apischemas import Errors
from runs.evaluations import selectors as evaluation_selectors
from runs.evaluations.forms import EvaluationForm
from runs.evaluations.services import EvaluationRefused, evaluation_create

router = Router()


class EvaluationIn(Schema):
    model: str | None = Field(
        None,
        description="One of the run page's model choices (base by default; the final "
        "model, a checkpoint, or another model with model_path).",
    )
    model_path: str = ""
    dataset_version: int = Field(description="A dataset version id you may see.")
    split: str = "eval"
    generator: str = Field("transformers", description="'transformers', or 'auto': vLLM where the worker can run it.")
    eval_num_samples: int | None = None
    eval_max_prompts: int | None = None
    eval_temperature: float | None = None
    eval_max_new_tokens: int | None = Field(None, description="Tokens per completion; by default the run's own.")
    eval_solved_by: str | None = None
    eval_threshold: float | None = None


@router.get(
    "/runs/{int:run_id}/evaluations",
    response=dict,
    tags=["evaluations"],
    summary="Every evaluation of the run with mean@k, pass@k, maj@k, greedy and the change against the base",
)
def run_evaluations(request, run_id: int):
    run = visible_run(request, run_id)
    return {"reward_names": run.reward_names, **evaluation_selectors.run_evaluations(run)}


@router.post(
    "/runs/{int:run_id}/evaluations",
    response={202: dict, 400: Errors},
    tags=["evaluations"],
    summary="Queue a standalone evaluation of one of the run's models",
)
def run_evaluate(request, run_id: int, body: EvaluationIn):
    run = writable_run(request, run_id)
    # what the caller leaves out takes the run page's defaults (the run's own evaluation settings)
    data = {**EvaluationForm(run=run).initial, **{k: v for k, v in body.dict().items() if v is not None}}
    form = EvaluationForm({k: "" if v is None else v for k, v in data.items()}, run=run)
    if not form.is_valid():
        return Status(400, {"errors": [f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()]})
    try:
        evaluation = evaluation_create(run=run, user=request.user, **form.evaluation_args())
    except EvaluationRefused as exc:
        return Status(400, {"errors": exc.errors})
    return Status(
        202,
        {
            "id": evaluation.pk,
            "label": evaluation.label,
            "status": evaluation.status,
            "url": reverse("evaluation_detail", args=[run.pk, evaluation.pk]),
        },
    )
