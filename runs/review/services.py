"""Making a review queue and moving through it. A queue holds a sample of the rollouts a browser filter selects,
stratified across steps (evenly spaced over the matches in step order, a random rollout within each step), or every
match. Reviewers are handed its items in order; an item handed to one is not handed to another while they hold it
(for CLAIM_SECONDS), so several people share a queue without seeing the same rollout twice."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from runs.models import Review, ReviewItem, Run
from runs.rollouts.filters import filtered

MAX_ITEMS = 10_000  # rollouts one queue holds
CLAIM_SECONDS = 15 * 60  # an item handed to a reviewer who went away goes to the next one after this
CLAIM_TRIES = 50


class ReviewError(Exception):
    """Why a queue could not be made or moved; nothing was changed."""


def _sample(qs, size: int, rng: random.Random) -> list[tuple[int, int]]:
    """(id, step) of ``size`` rollouts of ``qs``: ranks evenly spaced over the matches in step order (a random
    offset), so each step gets its share; within a step, random rollouts."""
    counts = list(qs.values("step").annotate(n=Count("id")).order_by("step").values_list("step", "n"))
    total = sum(n for _, n in counts)
    if total <= size:
        return list(qs.order_by("step", "index").values_list("id", "step"))
    offset = rng.random()
    ranks = [int((i + offset) * total / size) for i in range(size)]
    per_step: Counter = Counter()
    bounds, start = [], 0
    for step, n in counts:
        bounds.append((start, start + n, step))
        start += n
    b = 0
    for rank in ranks:  # ranks ascend: walk the steps once
        while rank >= bounds[b][1]:
            b += 1
        per_step[bounds[b][2]] += 1
    picked: list[tuple[int, int]] = []
    for step, k in sorted(per_step.items()):
        ids = list(qs.filter(step=step).values_list("id", flat=True))
        picked += [(pk, step) for pk in sorted(rng.sample(ids, k))]
    return picked


def review_create(
    *, run: Run, user, data: dict, query: str = "", mode: str = "sample", size: int = 50, name: str = "", seed=None
) -> Review:
    """A queue of ``size`` rollouts (``mode`` "sample") or of every rollout (``mode`` "all") that the cleaned
    browser filters ``data`` select on ``run``."""
    if mode not in Review.Mode.values:
        raise ReviewError(f"mode: {mode!r} is not one of {', '.join(Review.Mode.values)}")
    if mode == Review.Mode.SAMPLE and not (isinstance(size, int) and 1 <= size <= MAX_ITEMS):
        raise ReviewError(f"size: a sample of 1 to {MAX_ITEMS:,} rollouts")
    qs = filtered(run, data)
    if mode == Review.Mode.ALL:
        picked = list(qs.order_by("step", "index").values_list("id", "step")[: MAX_ITEMS + 1])
        if len(picked) > MAX_ITEMS:
            raise ReviewError(
                f"these filters match more than {MAX_ITEMS:,} rollouts: narrow them, or review a sample of them"
            )
    else:
        picked = _sample(qs, size, random.Random(seed))
    if not picked:
        raise ReviewError("no rollout matches these filters: nothing to review")
    with transaction.atomic():
        review = Review.objects.create(
            run=run, name=name.strip()[:200], query=query[:4000], mode=mode, size=len(picked), created_by=user
        )
        ReviewItem.objects.bulk_create(
            [ReviewItem(review=review, position=i, rollout_id=pk, step=step) for i, (pk, step) in enumerate(picked)],
            batch_size=2000,
        )
    return review


def _open_to(review: Review, now) -> Q:
    """Items of ``review`` a reviewer may be handed now: not done, and held by nobody (or by one who went away)."""
    return Q(review=review, done_at=None) & (
        Q(claimed_by=None) | Q(claimed_at__lt=now - timedelta(seconds=CLAIM_SECONDS))
    )


def review_next(*, review: Review, user) -> ReviewItem | None:
    """The item ``user`` holds, or the first nobody holds, now held by them; None when every item is done or held.
    Taking an item is one conditional UPDATE, so two reviewers asking at once never get the same one."""
    mine = ReviewItem.objects.filter(review=review, claimed_by=user, done_at=None).order_by("position").first()
    if mine is not None:
        return mine
    for _ in range(CLAIM_TRIES):
        now = timezone.now()
        candidate = ReviewItem.objects.filter(_open_to(review, now)).order_by("position").values_list("pk", flat=True)
        pk = candidate.first()
        if pk is None:
            return None
        if ReviewItem.objects.filter(_open_to(review, now), pk=pk).update(claimed_by=user, claimed_at=now):
            return ReviewItem.objects.get(pk=pk)
    raise ReviewError("the queue is busy: ask again")


def review_done(*, review: Review, user, position: int) -> ReviewItem:
    """Mark the item at ``position`` done by ``user``, who holds it (or did it already: nothing changes)."""
    item = ReviewItem.objects.filter(review=review, position=position).first()
    if item is None:
        raise LookupError(f"no item {position} in review {review.pk}")
    if item.done_at is not None:
        return item
    now = timezone.now()
    held = Q(claimed_by=user) | Q(claimed_by=None) | Q(claimed_at__lt=now - timedelta(seconds=CLAIM_SECONDS))
    if not ReviewItem.objects.filter(held, pk=item.pk, done_at=None).update(
        done_by=user, done_at=now, claimed_by=user, claimed_at=now
    ):
        item.refresh_from_db()
        if item.done_at is None:
            raise ReviewError(f"item {position} is with another reviewer")
    item.refresh_from_db()
    return item
