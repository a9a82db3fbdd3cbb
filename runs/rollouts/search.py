"""Search across the runs a user may see: the completions (or prompts) holding a text, newest first, a keyset page at
a time, each hit with its run, step, place and the text around the first match. The same syntax and index as the
rollout browser's search (runs.rollouts.filters.text_search, runs.textindex)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django import forms

from runs.models import Rollout, Run
from runs.rollouts.filters import search_terms, text_candidates, text_first, text_search

PAGE_SIZE = 50
SNIPPET = 160  # characters each side of the match
WHERE = {"both": ("completion", "prompt"), "completion": ("completion",), "prompt": ("prompt",)}


class SearchForm(forms.Form):
    q = forms.CharField(
        max_length=200,
        label="search",
        help_text='Words in any order, "a phrase", -excluded, or; any case.',
    )
    where = forms.ChoiceField(
        choices=[("both", "prompts and completions"), ("completion", "completions"), ("prompt", "prompts")],
        required=False,
        label="in",
    )
    after = forms.IntegerField(min_value=1, max_value=2**63 - 1, required=False, widget=forms.HiddenInput)

    def clean_q(self):
        value = self.cleaned_data["q"]
        if not _positive_terms(value):
            raise forms.ValidationError("give at least one word or phrase to find (not only -excluded ones)")
        return value


@dataclass
class Hit:
    rollout_id: int
    run_id: int
    run_name: str
    step: int
    index: int
    group: int
    where: str  # the field the snippet is from
    snippet: str


@dataclass
class SearchPage:
    hits: list[Hit]
    next_cursor: int | None


def _positive_terms(q: str) -> list[str]:
    return [t.text for t in search_terms(q) if not t.negate]


def search_runs(user, q: str, *, where: str = "both", after: int | None = None, size: int = PAGE_SIZE) -> SearchPage:
    """Hits of ``q`` in the runs ``user`` may see, newest first, after the rollout ``after``; SearchTooSlow when the
    database gives up (runs.rollouts.filters.guarded)."""
    fields = WHERE.get(where or "both", WHERE["both"])
    runs = list(Run.objects.visible_to(user).values_list("pk", flat=True))
    qs = Rollout.objects.filter(run__in=runs).filter(text_search(q, fields, runs=runs))
    if after:
        qs = qs.filter(id__lt=after)

    def page(candidates: list[int] | None) -> list[int]:
        rows = qs if candidates is None else qs.filter(id__in=candidates)
        return list(rows.order_by("-id").values_list("id", flat=True)[: size + 1])

    ids = text_first(page, lambda: text_candidates(runs, q=q, fields=fields))
    more = len(ids) > size
    ids = ids[:size]
    rows = Rollout.objects.filter(run__in=runs, id__in=ids).values(
        "id", "run_id", "run__name", "step", "index", "group", "prompt", "completion"
    )
    by_id = {r["id"]: r for r in rows}
    terms = _positive_terms(q)
    hits = []
    for i in ids:
        row = by_id[i]
        field, snippet = _snippet(row, fields, terms)
        hits.append(Hit(i, row["run_id"], row["run__name"], row["step"], row["index"], row["group"], field, snippet))
    return SearchPage(hits=hits, next_cursor=ids[-1] if more else None)


def _snippet(row: dict, fields: tuple[str, ...], terms: list[str]) -> tuple[str, str]:
    """The field and the text around the first match of any term (the start of the first field when none is found
    there, as with an `or`)."""
    for field in fields:
        text = row[field]
        for term in terms:
            m = re.search(re.escape(term), text, flags=re.IGNORECASE)
            if m:
                start, end = max(0, m.start() - SNIPPET), min(len(text), m.end() + SNIPPET)
                return field, ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
    field = fields[0]
    text = row[field]
    return field, text[: 2 * SNIPPET] + ("…" if len(text) > 2 * SNIPPET else "")
