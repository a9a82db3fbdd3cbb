"""Per-step series bucketed in the database, as W&B draws them: a chart gets at most ``buckets`` points a series (the
min, the max and the last value of each bucket of steps), so a 100,000-step run ships 1,000 points, not 100,000; a
one-step spike still shows as its bucket's max. A range no wider than the bucket count comes back exact, a point a
step. The page asks again for the range it zooms into.

The rows are StepMetric-like: an integer ``step`` and a JSON dict column of numbers (``metrics``). The values are read
in the query (PostgreSQL ``->>``, SQLite ``json_extract``): only numbers count, a string or a list is no value."""

from __future__ import annotations

import json
import math

from django.db import connection
from django.db.models import Count, ExpressionWrapper, F, Func, IntegerField, Max, Min, QuerySet
from django.db.models.fields import FloatField

DEFAULT_BUCKETS = 1000
MAX_BUCKETS = 2000


class JsonNumber(Func):
    """``column[key]`` as a float where it is a JSON number, else NULL."""

    output_field = FloatField()

    def __init__(self, column: str, key: str):
        super().__init__(F(column))
        self.key = key

    def as_postgresql(self, compiler, connection):
        column, params = compiler.compile(self.source_expressions[0])
        sql = f"CASE WHEN jsonb_typeof({column} -> %s) = 'number' THEN ({column} ->> %s)::double precision END"
        return sql, (*params, self.key, *params, self.key)

    def as_sqlite(self, compiler, connection):
        column, params = compiler.compile(self.source_expressions[0])
        path = "$." + json.dumps(self.key)  # a quoted member name: '/', '.', '@' and '"' in a metric name are literal
        sql = f"CASE WHEN json_type({column}, %s) IN ('integer', 'real') THEN json_extract({column}, %s) END"
        return sql, (*params, path, *params, path)


def _finite(value):
    return value if value is None or math.isfinite(value) else None


def step_buckets(rows: QuerySet, key: str, *, first: int, last: int, buckets: int = DEFAULT_BUCKETS) -> dict:
    """``key``'s values in ``rows`` between steps ``first`` and ``last`` (both included), in at most ``buckets``
    buckets of equal width: {"step": the step of each bucket's last value, "last", "min", "max" (lists alike),
    "exact": every bucket holds one value (then min = max = last), "width": steps a bucket spans}."""
    value = JsonNumber("metrics", key)
    rows = rows.filter(step__gte=first, step__lte=last).annotate(v=value).exclude(v=None).order_by()
    width = max(1, math.ceil((last - first + 1) / max(1, buckets)))
    out = {"step": [], "last": [], "min": [], "max": [], "width": width, "exact": True}
    if width == 1:  # a step a bucket: the points themselves
        for step, v in rows.order_by("step").values_list("step", "v").iterator(chunk_size=2000):
            v = _finite(v)
            out["step"].append(step)
            out["last"].append(v)
            out["min"].append(v)
            out["max"].append(v)
        return out
    bucket = ExpressionWrapper((F("step") - first) / width, output_field=IntegerField())
    groups = list(
        rows.annotate(bucket=bucket)
        .values("bucket")
        .annotate(lo=Min("v"), hi=Max("v"), at=Max("step"), n=Count("v"))
        .order_by("bucket")
        .values_list("at", "lo", "hi", "n")
    )
    # each bucket's last value: the value at its last step that has one, one indexed read of at most `buckets` rows
    at_steps = [g[0] for g in groups]
    lasts = dict(rows.filter(step__in=at_steps).values_list("step", "v")) if at_steps else {}
    for at, lo, hi, n in groups:
        out["step"].append(at)
        out["last"].append(_finite(lasts.get(at)))
        out["min"].append(_finite(lo))
        out["max"].append(_finite(hi))
        out["exact"] = out["exact"] and n == 1
    return out


def numeric_keys(rows: QuerySet, *, nulls: bool = True) -> list[str]:
    """The keys of ``rows``' ``metrics`` that hold a number (or, with ``nulls``, null) in some row, in the order they
    first appear (by step, then by name), read in the database: the rows themselves never come to Python."""
    null = ", 'null'" if nulls else ""
    inner, params = rows.order_by().values("step", "metrics").query.sql_with_params()
    if connection.vendor == "postgresql":
        sql = (
            f"SELECT e.key FROM ({inner}) AS r, jsonb_each(r.metrics) AS e "
            f"WHERE jsonb_typeof(e.value) IN ('number'{null}) GROUP BY e.key ORDER BY MIN(r.step), e.key"
        )
    else:
        sql = (
            f"SELECT e.key FROM ({inner}) AS r, json_each(r.metrics) AS e "
            f"WHERE e.type IN ('integer', 'real'{null}) GROUP BY e.key ORDER BY MIN(r.step), e.key"
        )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]
