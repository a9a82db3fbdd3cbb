"""The JSON API of review queues (grpo_web/api.py mounts this router at /api/): make one from the browser's filters,
take its next rollout, look at one again, read its progress and tallies. The review page uses the same endpoints."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from ninja import Router, Schema, Status
from ninja.errors import HttpError
from pydantic import Field

from runs.access import visible_run
from runs.models import Review, ReviewItem
from runs.review.forms import query_of, review_filters
from runs.review.selectors import item_json, previous_item, review_progress, review_tallies
from runs.review.services import ReviewError, review_create, review_done, review_next
from runs.rollouts.api import json_body

router = Router()


def _body(request) -> dict:
    """The JSON object the request sent ({} for none); 400 naming why otherwise."""
    body = json_body(request) if request.body else {}
    if not isinstance(body, dict):
        raise HttpError(400, "the body must be a JSON object")
    return body


def _review(request, run_id: int, review_id: int) -> Review:
    run = visible_run(request, run_id)
    return get_object_or_404(Review.objects.select_related("run"), pk=review_id, run=run)


def review_json(review: Review) -> dict:
    return {
        "id": review.pk,
        "name": str(review),
        "mode": review.mode,
        "size": review.size,
        "query": review.query,
        "url": review.get_absolute_url(),
        "created_at": review.created_at.isoformat(),
        "progress": review_progress(review),
        "tallies": review_tallies(review),
    }


class ReviewIn(Schema):
    filters: dict = Field(default_factory=dict, description="The rollout browser's filters, under its URL's names.")
    mode: str = Field("sample", description="sample: a sample stratified across steps; all: every match")
    size: int = Field(50, description="How many rollouts a sample holds (1 to 10,000).")
    name: str = Field("", max_length=200)


@router.post(
    "/runs/{int:run_id}/reviews",
    response={201: dict},
    tags=["reviews"],
    summary="Make a review queue from the rollout browser's filters",
    description='Body: {"filters": {"step_min": 10, "reward_min": 1}, "mode": "sample", "size": 50, "name": ""}.',
)
def run_review_create(request, run_id: int):
    run = visible_run(request, run_id)
    body = _body(request)
    unknown = sorted(set(body) - {"filters", "mode", "size", "name"})
    if unknown:
        raise HttpError(400, f"unknown key {unknown[0][:40]!r} (keys: filters, mode, size, name)")
    query = query_of(body.get("filters", {}))
    if query is None:
        raise HttpError(400, 'filters: an object of the browser\'s filters, {"key": "value"}')
    data, problem = review_filters(run, query)
    if data is None:
        raise HttpError(400, f"filters: {problem}")
    name, size = body.get("name", ""), body.get("size", 50)
    if not isinstance(name, str) or not isinstance(size, int) or isinstance(size, bool):
        raise HttpError(400, "name must be text and size a whole number")
    try:
        review = review_create(
            run=run,
            user=request.user,
            data=data,
            query=query.urlencode(),
            mode=body.get("mode", "sample"),
            size=size,
            name=name,
        )
    except ReviewError as exc:
        raise HttpError(400, str(exc)) from None
    return Status(201, review_json(review))


@router.get(
    "/runs/{int:run_id}/reviews/{int:review_id}",
    response=dict,
    tags=["reviews"],
    summary="A review queue: its progress and the tallies of its labels",
)
def run_review(request, run_id: int, review_id: int):
    return review_json(_review(request, run_id, review_id))


@router.post(
    "/runs/{int:run_id}/reviews/{int:review_id}/next",
    response=dict,
    tags=["reviews"],
    summary="Take the next rollout of a queue (the one you hold, or the first nobody holds)",
    description='Body: {"done": <position>} marks the item you were on done first. item is null when every item '
    "is done or held by another reviewer.",
)
def run_review_next(request, run_id: int, review_id: int):
    review = _review(request, run_id, review_id)
    done = _body(request).get("done")
    try:
        if done is not None:
            if not isinstance(done, int) or isinstance(done, bool) or done < 0:
                raise HttpError(400, "done: the position of the item you were on")
            review_done(review=review, user=request.user, position=done)
        item = review_next(review=review, user=request.user)
    except LookupError as exc:
        raise HttpError(404, str(exc)) from None
    except ReviewError as exc:
        raise HttpError(409, str(exc)) from None
    return {
        "item": item_json(review, item, request.user) if item else None,
        "progress": review_progress(review),
        "tallies": review_tallies(review) if item is None else [],
    }


@router.get(
    "/runs/{int:run_id}/reviews/{int:review_id}/items/{int:position}",
    response=dict,
    tags=["reviews"],
    summary="One item of a queue, to look at again; previous=true: the one before it",
)
def run_review_item(request, run_id: int, review_id: int, position: int, previous: bool = False):
    review = _review(request, run_id, review_id)
    item = (
        previous_item(review, request.user, position)
        if previous
        else ReviewItem.objects.filter(review=review, position=position).first()
    )
    if item is None:
        raise HttpError(404, f"no item {'before ' if previous else ''}{position} in review {review.pk}")
    return {"item": item_json(review, item, request.user), "progress": review_progress(review)}
