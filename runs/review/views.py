"""Review pages: a queue made from the rollout browser's filters, and the page that hands its rollouts over one at a
time (static/js/review.js, over runs.review.api)."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from runs.access import visible_run
from runs.models import Review
from runs.review.forms import review_filters
from runs.review.selectors import review_progress, review_tallies
from runs.review.services import MAX_ITEMS, ReviewError, review_create
from runs.rollouts.labels import label_names


@require_POST
def run_review_new(request, pk):
    """A queue from the browser's filters (its query string), of the size and mode the form says."""
    run = visible_run(request, pk)
    back = f"{reverse('run_rollouts', args=[run.pk])}?{request.GET.urlencode()}"
    data, problem = review_filters(run, request.GET)
    if data is None:
        messages.error(request, f"The filters are not valid: {problem}")
        return redirect(back)
    try:
        size = int(request.POST.get("size") or 50)
    except ValueError:
        messages.error(request, f"Give how many rollouts to review (1 to {MAX_ITEMS:,}).")
        return redirect(back)
    try:
        review = review_create(
            run=run,
            user=request.user,
            data=data,
            query=request.GET.urlencode(),
            mode=request.POST.get("mode", "sample"),
            size=size,
            name=request.POST.get("name", ""),
        )
    except ReviewError as exc:
        messages.error(request, str(exc))
        return redirect(back)
    return redirect(review)


@require_GET
def run_review(request, pk, review_id):
    run = visible_run(request, pk)
    review = get_object_or_404(Review, pk=review_id, run=run)
    return render(
        request,
        "review/run_review.html",
        {
            "run": run,
            "review": review,
            "label_names": label_names(run, request.user)[:9],
            "progress": review_progress(review),
            "tallies": review_tallies(review),
        },
    )
