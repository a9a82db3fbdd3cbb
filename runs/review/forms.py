"""The browser's filters as a review queue reads them (from a page's query string or an API body)."""

from __future__ import annotations

from django.http import QueryDict

from runs.rollouts.filters import RolloutFilterForm, unknown_filters


def review_filters(run, query: QueryDict) -> tuple[dict | None, str]:
    """The cleaned filters of ``query``, or None and why not (an unknown key, a value that is not valid)."""
    query = query.copy()
    for key in ("after", "sort", "replay"):  # a page's cursor, order and replay choose no rollout
        query.pop(key, None)
    problem = unknown_filters(query, ())
    if problem:
        return None, problem
    form = RolloutFilterForm(query, run=run)
    if not form.is_valid():
        return None, "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
    return form.cleaned_data, ""


def query_of(filters) -> QueryDict | None:
    """An API body's {"key": value} filters as a query string would bring them; None when it is no such object."""
    if not isinstance(filters, dict):
        return None
    query = QueryDict(mutable=True)
    for key, value in filters.items():
        if not isinstance(key, str) or isinstance(value, (dict, list)) or value is None:
            return None
        query[key] = ("yes" if value else "no") if isinstance(value, bool) else str(value)
    return query
