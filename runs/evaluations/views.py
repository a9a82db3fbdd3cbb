"""Evaluations of a run (a standalone job is started from the run page: runs.lifecycle.views.run_evaluate): the run's
evaluations as JSON (with the change
against the base model), and one evaluation's completions browsed by prompt and exported, like the training
rollouts. Every URL answers 404 unless the user may see the run (runs.access)."""

from __future__ import annotations

from django.http import JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from runs.access import async_chunks, visible_run
from runs.evaluations import selectors as evaluation_selectors
from runs.evaluations.selectors import EvalFilterForm
from runs.evaluations.services import eval_max_new_tokens
from runs.models import Evaluation, Run

METRICS = ("mean@k", "pass@k", "maj@k", "greedy", "reward_mean@k", "reward_greedy", "answer_rate")


def _visible_evaluation(request, pk, evaluation_id) -> Evaluation:
    return get_object_or_404(
        Evaluation.objects.select_related("run", "dataset_version__dataset"),
        pk=evaluation_id,
        run_id=pk,
        run__in=Run.objects.visible_to(request.user),
    )


@require_GET
def run_evaluations_json(request, pk):
    run = visible_run(request, pk)
    return JsonResponse({"reward_names": run.reward_names, **evaluation_selectors.run_evaluations(run)})


@require_GET
def evaluation_detail(request, pk, evaluation_id):
    evaluation = _visible_evaluation(request, pk, evaluation_id)
    form = EvalFilterForm(request.GET)
    valid = form.is_valid()
    params = request.GET.copy()
    params.pop("page", None)
    query = params.urlencode()
    return render(
        request,
        "evaluations/evaluation_detail.html",
        {
            "run": evaluation.run,
            "evaluation": evaluation,
            "temperature": evaluation.settings.get("eval_temperature", 1.0),
            "max_new_tokens": eval_max_new_tokens(evaluation.run, evaluation.settings),
            "form": form,
            "filter_query": query,
            "page_url": "?" + (query + "&" if query else "") + "page=",
            "page": evaluation_selectors.evaluation_page(evaluation, form.cleaned_data) if valid else None,
            "metrics": [
                (name.replace("@k", f"@{evaluation.k}"), evaluation.metrics[name])
                for name in METRICS
                if name in evaluation.metrics
            ],
        },
        status=200 if valid else 400,
    )


@require_GET
def evaluation_jsonl(request, pk, evaluation_id):
    """The completions that pass the browser's filters, as JSON lines, streamed."""
    evaluation = _visible_evaluation(request, pk, evaluation_id)
    form = EvalFilterForm(request.GET)
    if not form.is_valid():
        return JsonResponse({"errors": {k: [str(e) for e in v] for k, v in form.errors.items()}}, status=400)
    response = StreamingHttpResponse(
        async_chunks(evaluation_selectors.sample_jsonl(evaluation, form.cleaned_data)),
        content_type="application/x-ndjson",
    )
    response["Content-Disposition"] = f'attachment; filename="run-{pk}-evaluation-{evaluation.pk}.jsonl"'
    return response
