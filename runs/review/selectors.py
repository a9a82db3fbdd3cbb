"""What a review page shows: one item with its group around it, the progress, and the tallies of its labels."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.db.models import Count
from django.urls import reverse

from runs.models import Review, ReviewItem, Rollout
from runs.rollouts.filters import BROWSER_FIELDS
from runs.rollouts.labels import labels_of_rows
from runs.rollouts.reflection import matcher
from runs.rollouts.selectors import step_groups


def review_progress(review: Review) -> dict:
    """How many items are done, by whom, and how many are held now."""
    items = ReviewItem.objects.filter(review=review)
    done = dict(
        items.filter(done_at__isnull=False).values_list("done_by").annotate(n=Count("id")).values_list("done_by", "n")
    )
    names = dict(get_user_model().objects.filter(pk__in=[k for k in done if k]).values_list("pk", "username"))
    return {
        "total": review.size,
        "done": sum(done.values()),
        "held": items.filter(done_at=None, claimed_by__isnull=False).count(),
        "by_reviewer": {names.get(k, "(deleted user)"): n for k, n in sorted(done.items(), key=lambda kv: -kv[1])},
    }


def review_tallies(review: Review) -> list[dict]:
    """Each label on the review's rollouts (on them or on their groups), how many rollouts carry it, and the browser's
    address of those rollouts."""
    items = ReviewItem.objects.filter(review=review)
    rows = list(
        Rollout.objects.filter(run=review.run_id, id__in=items.values("rollout_id")).values("id", "step", "group")
    )
    counts: dict[str, int] = {}
    for labels in labels_of_rows(review.run, rows).values():
        for name in {lab["name"] for lab in labels}:
            counts[name] = counts.get(name, 0) + 1
    base = reverse("run_rollouts", args=[review.run_id])
    return [
        {"name": name, "rollouts": n, "url": f"{base}?{urlencode({'review': review.pk, 'label': name})}"}
        for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def item_json(review: Review, item: ReviewItem, user) -> dict:
    """One item: the rollout in full (the browser's row, with its labels), and its group, each completion a preview."""
    run = review.run
    row = Rollout.objects.filter(id=item.rollout_id, run=run).values(*BROWSER_FIELDS).first()
    out = {"position": item.position, "done": item.done_at is not None, "rollout": None, "group": None}
    if row is None:  # its run was re-ingested since: the item stays, empty
        return out
    row.pop("columns", None)
    row["rewards"] = dict(zip(run.reward_names, row["rewards"]))
    row["spans"] = matcher(tuple(run.reflection_phrases)).spans(row["completion"])
    row["labels"] = labels_of_rows(run, [row], user)[row["id"]]
    row["link"] = reverse("rollout_link", args=[run.pk, row["id"]])
    group = step_groups(run, row["step"], first_group=row["group"], groups=1, previews=True)
    out.update(rollout=row, group=group[0] if group else None)
    return out


def previous_item(review: Review, user, position: int) -> ReviewItem | None:
    """The item before ``position`` that ``user`` did (to look again), else the one just before it."""
    mine = ReviewItem.objects.filter(review=review, done_by=user, position__lt=position).order_by("-position").first()
    return mine or ReviewItem.objects.filter(review=review, position__lt=position).order_by("-position").first()
