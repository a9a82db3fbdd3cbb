"""Labels (issue 39): what a reviewer found, kept on a rollout, a group or a step, with an optional note and the span
of the completion it points at. Whoever may see a run may label it (a teammate of a shared run as well as its
owner); each label keeps its author and time, and only its author removes it. A batch of labels (the browser's one,
or an API import of thousands) is checked whole and stored whole, or refused whole with each reason named by item
and key."""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.urls import reverse

from runs.models import BUILT_IN_LABELS, Label, Review, Rollout, Run, StepMetric
from runs.rollouts.reflection import utf16_length

MAX_NAME = 64
MAX_NOTE = 4000
MAX_BATCH = 1000  # labels in one request
MAX_PER_RUN = 200_000  # labels one run holds, every author together
MAX_GROUP_CLAUSES = 200  # past this many labeled steps, the label filter asks the database per row instead
ITEM_KEYS = {"rollout", "step", "group", "name", "note", "span", "review"}


class LabelError(Exception):
    """Why a batch of labels was refused; nothing of it was stored."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass
class Stored:
    created: list[Label]
    existing: list[Label]  # the same label by the same author was there already: not stored twice


def _whole_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _text_problem(value: str, *, multiline: bool) -> str | None:
    for ch in value:
        if ch in "\t\n\r" and multiline:
            continue
        if unicodedata.category(ch) in ("Cc", "Cs") or (not multiline and unicodedata.category(ch) in ("Zl", "Zp")):
            return f"holds the control character U+{ord(ch):04X}"
    return None


def clean_name(value) -> str:
    """A label's name: text of 1 to MAX_NAME characters on one line (ValueError says why not)."""
    if not isinstance(value, str):
        raise ValueError("must be text")
    name = " ".join(value.split())
    if not name:
        raise ValueError("is empty")
    if len(name) > MAX_NAME:
        raise ValueError(f"is {len(name)} characters; at most {MAX_NAME}")
    problem = _text_problem(name, multiline=False)
    if problem:
        raise ValueError(problem)
    return name


def _clean_note(value) -> str:
    if not isinstance(value, str):
        raise ValueError("must be text")
    if len(value) > MAX_NOTE:
        raise ValueError(f"is {len(value):,} characters; at most {MAX_NOTE:,}")
    problem = _text_problem(value, multiline=True)
    if problem:
        raise ValueError(problem)
    return value.strip()


def _check_item(item, where: str, errors: list[str]) -> dict | None:
    """The item's fields, checked for type and form (not yet against the run)."""
    if not isinstance(item, dict):
        errors.append(f"{where}: must be an object with name and rollout, or step and group, or step")
        return None
    unknown = sorted(set(item) - ITEM_KEYS, key=str)
    if unknown:
        errors.append(f"{where}: unknown key {str(unknown[0])[:40]!r} (keys: {', '.join(sorted(ITEM_KEYS))})")
        return None
    out: dict = {}
    try:
        out["name"] = clean_name(item.get("name"))
    except ValueError as exc:
        errors.append(f"{where}.name: {exc}")
    try:
        out["note"] = _clean_note(item.get("note") or "")
    except ValueError as exc:
        errors.append(f"{where}.note: {exc}")
    for key in ("rollout", "step", "group", "review"):
        if item.get(key) is not None and not _whole_number(item[key]):
            errors.append(f"{where}.{key}: must be a whole number ≥ 0")
            return None
    rollout, step, group = item.get("rollout"), item.get("step"), item.get("group")
    if rollout is not None and (step is not None or group is not None):
        errors.append(f"{where}: give rollout, or step and group, or step; not both a rollout and a step")
        return None
    if rollout is None and step is None:
        errors.append(f"{where}: say what is labeled: rollout (an id), or step and group, or step")
        return None
    span = item.get("span")
    if span is not None:
        if rollout is None:
            errors.append(f"{where}.span: only a label on a rollout points at a span of its completion")
            return None
        if not (isinstance(span, list) and len(span) == 2 and all(_whole_number(v) for v in span)):
            errors.append(f"{where}.span: must be [start, end], whole numbers (UTF-16 units of the completion)")
            return None
        if span[0] >= span[1]:
            errors.append(f"{where}.span: start {span[0]} is not before end {span[1]}")
            return None
    out.update(rollout=rollout, step=step, group=group, span=span, review=item.get("review"))
    return out


def _check_targets(run: Run, items: list[tuple[str, dict]], errors: list[str]) -> None:
    """Each item's rollout, group or step exists in ``run``; a rollout label takes its step and group, and its span
    lies inside its completion."""
    rollout_ids = {i["rollout"] for _, i in items if i["rollout"] is not None}
    with_span = {i["rollout"] for _, i in items if i["span"] is not None}
    found = (
        {r["id"]: r for r in Rollout.objects.filter(run=run, id__in=rollout_ids).values("id", "step", "group")}
        if rollout_ids
        else {}
    )
    lengths = (
        {
            pk: utf16_length(text)
            for pk, text in Rollout.objects.filter(run=run, id__in=with_span & set(found)).values_list(
                "id", "completion"
            )
        }
        if with_span
        else {}
    )
    wanted_groups: dict[int, set[int]] = defaultdict(set)
    wanted_steps: set[int] = set()
    for _, i in items:
        if i["rollout"] is None and i["group"] is not None:
            wanted_groups[i["step"]].add(i["group"])
        elif i["rollout"] is None:
            wanted_steps.add(i["step"])
    groups: set[tuple[int, int]] = set()
    for step, wanted in wanted_groups.items():
        groups |= set(
            Rollout.objects.filter(run=run, step=step, group__in=wanted).values_list("step", "group").distinct()
        )
    steps = set(Rollout.objects.filter(run=run, step__in=wanted_steps).values_list("step", flat=True).distinct())
    steps |= set(StepMetric.objects.filter(run=run, step__in=wanted_steps).values_list("step", flat=True))
    wanted_reviews = {i["review"] for _, i in items if i["review"] is not None}
    reviews = set(Review.objects.filter(run=run, pk__in=wanted_reviews).values_list("pk", flat=True))
    for where, i in items:
        if i["review"] is not None and i["review"] not in reviews:
            errors.append(f"{where}.review: no review {i['review']} of run {run.pk}")
        if i["rollout"] is not None:
            row = found.get(i["rollout"])
            if row is None:
                errors.append(f"{where}.rollout: no rollout {i['rollout']} in run {run.pk}")
                continue
            i["step"], i["group"] = row["step"], row["group"]
            if i["span"] is not None and i["span"][1] > lengths[i["rollout"]]:
                errors.append(
                    f"{where}.span: ends at {i['span'][1]}, past the completion's end "
                    f"({lengths[i['rollout']]} UTF-16 units)"
                )
        elif i["group"] is not None and (i["step"], i["group"]) not in groups:
            errors.append(f"{where}.group: no group {i['group']} at step {i['step']} of run {run.pk}")
        elif i["group"] is None and i["step"] not in steps:
            errors.append(f"{where}.step: run {run.pk} logged no step {i['step']}")


def _key(author_id, i: dict) -> tuple:
    span = tuple(i["span"]) if i["span"] is not None else (None, None)
    return (author_id, i["rollout"], i["step"], i["group"], i["name"], *span)


def labels_create(*, run: Run, user, items) -> Stored:
    """Store the labels ``items`` (dicts: name, note, span, and rollout or step and group or step) by ``user`` on
    ``run``, all or none (LabelError names each problem as items[i].key). A label the same author already put on
    the same target, with the same name and span, is not stored twice (its note is kept as it was)."""
    if not isinstance(items, list) or not items:
        raise LabelError(["labels: send a list of 1 to 1,000 labels"])
    if len(items) > MAX_BATCH:
        raise LabelError([f"labels: {len(items):,} in one request; at most {MAX_BATCH:,}"])
    errors: list[str] = []
    checked = []
    for n, item in enumerate(items):
        where = f"labels[{n}]" if len(items) > 1 else "label"
        clean = _check_item(item, where, errors)
        if clean is not None:
            checked.append((where, clean))
    if not errors:
        _check_targets(run, checked, errors)
    if errors:
        raise LabelError(errors[:50] + ([f"... and {len(errors) - 50} more"] if len(errors) > 50 else []))
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()  # one batch at a time per run: the cap holds
        have = Label.objects.filter(run=run, author=user, step__in={i["step"] for _, i in checked})
        existing = {
            (lab.author_id, lab.rollout_id, lab.step, lab.group, lab.name, lab.span_start, lab.span_end): lab
            for lab in have
        }
        new, old, seen = [], [], set()
        for _, i in checked:
            key = _key(user.pk, i)
            if key in existing:
                old.append(existing[key])
            elif key not in seen:
                seen.add(key)
                span = i["span"] or (None, None)
                new.append(
                    Label(
                        run=run,
                        author=user,
                        rollout_id=i["rollout"],
                        step=i["step"],
                        group=i["group"],
                        name=i["name"],
                        note=i["note"],
                        span_start=span[0],
                        span_end=span[1],
                        review_id=i["review"],
                    )
                )
        held = Label.objects.filter(run=run).count()
        if held + len(new) > MAX_PER_RUN:
            raise LabelError([f"labels: run {run.pk} holds {held:,} labels; at most {MAX_PER_RUN:,}"])
        created = Label.objects.bulk_create(new)
    return Stored(created=created, existing=old)


def label_delete(*, run: Run, user, label_id: int) -> None:
    """Remove a label; only its author may (PermissionError); LookupError when ``run`` has no such label."""
    label = Label.objects.filter(run=run, pk=label_id).first()
    if label is None:
        raise LookupError(f"no label {label_id} on run {run.pk}")
    if label.author_id != user.pk:
        raise PermissionError("only the label's author may remove it")
    label.delete()


# --- reading -----------------------------------------------------------------------------------------------------


def label_json(label: Label, names: dict[int, str], user) -> dict:
    return {
        "id": label.pk,
        "name": label.name,
        "note": label.note,
        "on": label.target,
        "rollout": label.rollout_id,
        "step": label.step,
        "group": label.group,
        "span": [label.span_start, label.span_end] if label.span_start is not None else None,
        "author": names.get(label.author_id, "(deleted user)"),
        "mine": label.author_id == user.pk if user is not None else False,
        "created_at": label.created_at.isoformat(),
    }


def _authors(labels) -> dict[int, str]:
    from django.contrib.auth import get_user_model

    ids = {lab.author_id for lab in labels if lab.author_id is not None}
    return dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username")) if ids else {}


def labels_of_rows(run: Run, rows: list[dict], user=None) -> dict[int, list[dict]]:
    """Each row's labels (by rollout id): its own, and those on its group."""
    if not rows:
        return {}
    ids = [r["id"] for r in rows]
    steps = {r["step"] for r in rows}
    groups = {r["group"] for r in rows}
    labels = list(
        Label.objects.filter(run=run).filter(
            Q(rollout_id__in=ids) | Q(rollout_id=None, step__in=steps, group__in=groups)
        )
    )
    names = _authors(labels)
    on_row, on_group = defaultdict(list), defaultdict(list)
    for lab in labels:
        (on_row[lab.rollout_id] if lab.rollout_id is not None else on_group[(lab.step, lab.group)]).append(
            label_json(lab, names, user)
        )
    return {r["id"]: on_row.get(r["id"], []) + on_group.get((r["step"], r["group"]), []) for r in rows}


def labels_page(run: Run, user, *, after: int = 0, limit: int = 500, name: str = "") -> tuple[list[dict], int | None]:
    """The run's labels in the order they were made, ``limit`` after the id ``after``; the next cursor or None."""
    qs = Label.objects.filter(run=run, pk__gt=after).order_by("pk")
    if name:
        qs = qs.filter(name=name)
    labels = list(qs[: limit + 1])
    more = len(labels) > limit
    labels = labels[:limit]
    names = _authors(labels)
    return [label_json(lab, names, user) for lab in labels], (labels[-1].pk if more else None)


def labels_page_latest(run: Run, user, limit: int = 200) -> list[dict]:
    """The ``limit`` labels made last on ``run``, newest first, each with the address of what it labels."""
    latest = list(Label.objects.filter(run=run).order_by("-pk")[:limit])
    names = _authors(latest)
    out = []
    for lab in latest:
        row = label_json(lab, names, user)
        if lab.rollout_id is not None:
            row["url"] = reverse("rollout_link", args=[run.pk, lab.rollout_id])
        elif lab.group is not None:
            row["url"] = reverse("group_link", args=[run.pk, lab.step, lab.group])
        else:
            row["url"] = f"{reverse('run_detail', args=[run.pk])}?step={lab.step}"
        out.append(row)
    return out


def label_names(run: Run, user=None) -> list[str]:
    """The names a reviewer of ``run`` is offered: the built-ins, then this run's own (most used first), then those
    used on the other runs ``user`` may see (their own and their teams' runs)."""

    def used(qs) -> list[str]:
        rows = qs.exclude(name__in=BUILT_IN_LABELS).values("name").annotate(n=Count("id")).order_by("-n", "name")
        return [r["name"] for r in rows[:100]]

    names = list(BUILT_IN_LABELS) + used(Label.objects.filter(run=run))
    if user is not None and user.is_authenticated:
        others = Label.objects.filter(run__in=Run.objects.visible_to(user).exclude(pk=run.pk))
        names += [n for n in used(others) if n not in names]
    return names[:200]


def label_counts(run: Run) -> dict:
    """Each label's count per step (on rollouts, groups and steps alike): {"labels": [{name, steps, counts}]}, the
    most used label first; steps with none of a label are left out of its series."""
    rows = Label.objects.filter(run=run).values("name", "step").annotate(n=Count("id")).order_by("name", "step")
    series: dict[str, dict] = {}
    for r in rows:
        s = series.setdefault(r["name"], {"name": r["name"], "steps": [], "counts": [], "total": 0})
        s["steps"].append(r["step"])
        s["counts"].append(r["n"])
        s["total"] += r["n"]
    return {"labels": sorted(series.values(), key=lambda s: (-s["total"], s["name"]))}


def labeled(run: Run, name: str) -> Q:
    """The rollout browser's ``label`` filter: rollouts with the label ``name``, on themselves or on their group."""
    on_rows = Label.objects.filter(run=run, name=name, rollout_id__isnull=False).values("rollout_id")
    clause = Q(id__in=on_rows)
    pairs = (
        Label.objects.filter(run=run, name=name, rollout_id=None, group__isnull=False)
        .values_list("step", "group")
        .distinct()
    )
    pairs = list(pairs[: MAX_GROUP_CLAUSES * 10 + 1])
    by_step: dict[int, set[int]] = defaultdict(set)
    for step, group in pairs:
        by_step[step].add(group)
    if len(by_step) <= MAX_GROUP_CLAUSES and len(pairs) <= MAX_GROUP_CLAUSES * 10:
        for step, groups in by_step.items():
            clause |= Q(step=step, group__in=sorted(groups))
        return clause
    on_group = Label.objects.filter(run=run, name=name, rollout_id=None, step=OuterRef("step"), group=OuterRef("group"))
    return clause | Q(Exists(on_group))
