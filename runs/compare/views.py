"""The comparison of 2 to 6 runs: a page, the JSON endpoints behind it, and one event stream for all its runs.

Every endpoint answers 404 unless the user owns every run named in ``?runs=``."""

from __future__ import annotations

from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from runs.compare import selectors as compare
from runs.compare.selectors import CompareError, CompareParams
from runs.evaluations.selectors import compared_evaluations
from runs.lifecycle.config_diff import config_table
from runs.live import sse_response
from runs.models import Run
from runs.rollouts.criteria import CriterionError, criterion_for, solve_choices


def _compared_runs(request) -> list[Run]:
    """The runs named by ``?runs=3,5``, in that order; 404 unless the user may see each of them."""
    ids = compare.parse_run_ids(request.GET.getlist("runs"))
    found = Run.objects.visible_to(request.user).select_related("dataset_version__dataset").in_bulk(ids)
    if len(found) != len(ids):
        raise Http404
    return [found[pk] for pk in ids]


@require_GET
def run_compare(request):
    picked = request.GET.getlist("runs")
    if len(picked) > 1:  # the dashboard's checkboxes (runs=5&runs=3): the shareable form is runs=3,5
        query = request.GET.copy()
        query.setlist("runs", [",".join(sorted(picked, key=lambda v: int(v) if v.isdigit() else 0))])
        return redirect(f"{request.path}?{query.urlencode(safe=',')}")
    try:
        runs = _compared_runs(request)
        params = CompareParams.parse(request.GET)
        criterion = criterion_for(runs, params.solved_by, params.threshold)
    except (CompareError, CriterionError) as exc:
        return render(request, "compare/compare.html", {"error": str(exc)}, status=400)
    return render(
        request,
        "compare/compare.html",
        {
            "runs": runs,
            "ids": ",".join(str(run.pk) for run in runs),
            "config_rows": config_table(runs, provenance=True),
            "metrics": compare.metric_names(runs),
            "params": params,
            "criterion": criterion,
            "solve_choices": solve_choices(runs),
            "live": any(not run.is_finished for run in runs),
            "evaluations": compared_evaluations(runs),
        },
    )


def _json(request, build):
    """Runs and parameters from the query, then ``build(runs, params)``; a bad parameter is a 400 naming it."""
    try:
        runs = _compared_runs(request)
        return JsonResponse(build(runs, CompareParams.parse(request.GET)))
    except (CompareError, CriterionError) as exc:
        return JsonResponse({"error": str(exc)}, status=400)


@require_GET
def run_compare_metrics(request):
    return _json(
        request,
        lambda runs, p: compare.metric_curves(
            runs, p.metric, smooth=p.smooth, x=p.x, first=p.first, last=p.last, buckets=p.buckets
        ),
    )


@require_GET
def run_compare_prompts(request):
    return _json(
        request, lambda runs, p: compare.prompt_comparison(runs, criterion_for(runs, p.solved_by, p.threshold))
    )


@require_GET
def run_compare_transcripts(request):
    def build(runs, p):
        prompt = compare.find_prompt(runs, p.prompt)
        if prompt is None:
            raise Http404("no compared run sampled that prompt")
        return compare.side_by_side(runs, prompt, p.step, criterion_for(runs, p.solved_by, p.threshold))

    return _json(request, build)


async def run_compare_events(request):
    """Server-sent events for all the compared runs on one connection (a browser opens at most six per host)."""
    try:
        ids = compare.parse_run_ids(request.GET.getlist("runs"))
    except (CompareError, CriterionError) as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    user = await request.auser()
    if await Run.objects.visible_to(user).filter(pk__in=ids).acount() != len(ids):
        raise Http404
    return sse_response(ids)
