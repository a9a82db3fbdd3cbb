"""The rollout browser's filters and sort, read from a query string, as one queryset (the page, the exports and the
rejection sampler all use it), and keyset pages over it.

Pages are keyset pages: each ends with a cursor (the last row's sort value and id) and the next one starts after it,
so a page deep into ten million rows reads as fast as the first. There is no total count: counting millions of
matches on every page costs more than the page.

Sorted by advantage, a page is read one reward bucket at a time from one index that also holds the numeric and
yes/no filters (``rollout_page``), so neither a filter nor a reward range far from the top advantages makes it read
rows it does not show.

The text filters (a phrase, a search) use the text index (runs.textindex: pg_trgm on PostgreSQL, FTS5 trigrams on
SQLite): a rare phrase is found from the index, a common one as the sorted scan meets it. On PostgreSQL a query that
still runs past ``SEARCH_TIMEOUT_MS`` (a text of one or two characters, matched nowhere, over millions of rows) stops
with a message asking for a narrower search instead of tying up the database.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from django import forms
from django.db import connection, transaction
from django.db.models import F, Q, QuerySet
from django.db.models.lookups import GreaterThan
from django.db.utils import OperationalError

from runs.forms import YES_NO
from runs.models import Review, ReviewItem, Rollout, Run, reward_bucket
from runs.rollouts.labels import clean_name, labeled
from runs.rollouts.reflection import js_spans, matcher
from runs.textindex import MIN_INDEXED, SCAN_ONLY, InRuns, completion_candidates

PAGE_SIZE = 50
MAX_IDS = 100  # example rollouts one link may name
SEARCH_TIMEOUT_MS = 5000
FIRST_TRY_MS = 150  # the text index's try (guarded)
# sort -> (field, descending, tie-breaker)
SORTS = {
    "adv_desc": ("advantage", True, "id"),
    "adv_asc": ("advantage", False, "id"),
    "reward_desc": ("reward", True, "id"),
    "reward_asc": ("reward", False, "id"),
    "step_asc": ("step", False, "index"),
    "step_desc": ("step", True, "index"),
}
SORT_LABELS = {
    "adv_desc": "advantage, highest first",
    "adv_asc": "advantage, lowest first",
    "reward_desc": "reward, highest first",
    "reward_asc": "reward, lowest first",
    "step_asc": "step, first to last",
    "step_desc": "step, last to first",
}


class SearchTooSlow(Exception):
    """The database gave up on a text search (PostgreSQL statement timeout)."""


BROWSER_KEYS = ("replay",)  # the browser's keys that are no filter: the reward replay shown beside the rows


def unknown_filters(query, also: tuple[str, ...] = BROWSER_KEYS) -> str | None:
    """What is wrong with a query's keys that are no filter (a typo, stepmin=, must not quietly select every row),
    naming them and the known ones; None when every key is known."""
    unknown = sorted(set(query) - set(RolloutFilterForm.base_fields) - set(also))
    if not unknown:
        return None
    known = ", ".join([*RolloutFilterForm.base_fields, *also])
    return f"unknown filter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)} (known: {known})"


class RolloutFilterForm(forms.Form):
    step_min = forms.IntegerField(min_value=0, required=False, label="step from")
    step_max = forms.IntegerField(min_value=0, required=False, label="step to")
    reward_min = forms.FloatField(required=False, label="reward ≥")
    reward_max = forms.FloatField(required=False, label="reward ≤")
    adv_min = forms.FloatField(required=False, label="advantage ≥")
    adv_max = forms.FloatField(required=False, label="advantage ≤")
    len_min = forms.IntegerField(min_value=0, required=False, label="tokens ≥")
    len_max = forms.IntegerField(min_value=0, required=False, label="tokens ≤")
    first_step_below = forms.FloatField(
        required=False,
        label="first step scored <",
        help_text="Per-step (process) scores: the first scored step below this.",
    )
    truncated = forms.ChoiceField(choices=YES_NO, required=False, label="truncated")
    zero_std = forms.ChoiceField(choices=YES_NO, required=False, label="zero-variance group")
    reflective = forms.ChoiceField(choices=YES_NO, required=False, label="self-reflection")
    reflection = forms.CharField(max_length=200, required=False, label="reflection phrase")
    phrase = forms.CharField(
        max_length=200, required=False, label="contains", help_text="Text the completion contains, any case."
    )
    q = forms.CharField(
        max_length=200,
        required=False,
        label="search",
        help_text='Words of the prompt or completion, in any order; "a phrase", -excluded, or.',
    )
    label = forms.CharField(
        max_length=200,
        required=False,
        label="label",
        help_text="A reviewer's label, on the rollout or its group.",
        widget=forms.TextInput(attrs={"list": "label-names"}),
    )
    no_label = forms.CharField(
        max_length=200,
        required=False,
        label="without label",
        help_text="Leave out the rollouts with this label (on them or their group).",
        widget=forms.TextInput(attrs={"list": "label-names"}),
    )
    review = forms.IntegerField(min_value=1, required=False, widget=forms.HiddenInput)
    prompt = forms.CharField(max_length=16, required=False, widget=forms.HiddenInput)
    ids = forms.CharField(
        max_length=MAX_IDS * 12,
        required=False,
        widget=forms.HiddenInput,
        help_text="Rollout ids, comma-separated: the examples a health alert links to.",
    )
    sort = forms.ChoiceField(choices=list(SORT_LABELS.items()), required=False, label="sort by")
    after = forms.CharField(max_length=200, required=False, widget=forms.HiddenInput)

    def __init__(self, data=None, *, run: Run, **kwargs):
        super().__init__(data, **kwargs)
        self.run = run
        self.fields["reflection"].widget = forms.Select(
            choices=[("", "any")] + [(p, p) for p in run.reflection_phrases]
        )

    def clean_reflection(self):
        value = self.cleaned_data["reflection"]
        if value and value not in self.run.reflection_phrases:
            raise forms.ValidationError("not one of this run's reflection phrases")
        return value

    def _label_name(self, key: str) -> str:
        value = self.cleaned_data[key]
        try:
            return clean_name(value) if value else ""
        except ValueError as exc:
            raise forms.ValidationError(f"a label name {exc}") from None

    def clean_label(self):
        return self._label_name("label")

    def clean_no_label(self):
        return self._label_name("no_label")

    def clean_review(self):
        value = self.cleaned_data["review"]
        if value and not Review.objects.filter(pk=value, run=self.run).exists():
            raise forms.ValidationError("not a review of this run")
        return value

    def clean_ids(self):
        value = self.cleaned_data["ids"]
        if not value:
            return ""
        parts = [p for p in value.split(",") if p.strip()]
        if len(parts) > MAX_IDS or not all(
            p.strip().isascii() and p.strip().isdigit() and len(p.strip()) < 19 for p in parts
        ):
            raise forms.ValidationError(f"up to {MAX_IDS} rollout ids, comma-separated")
        return ",".join(p.strip() for p in parts)

    def clean_after(self):
        value = self.cleaned_data["after"]
        if value and _parse_cursor(value, self.cleaned_data.get("sort") or "adv_desc") is None:
            raise forms.ValidationError("not a page cursor")
        return value

    def filters(self) -> dict:
        """The non-empty filters (sort and cursor excepted), for links and exports."""
        return {k: v for k, v in self.cleaned_data.items() if v not in (None, "") and k not in ("sort", "after")}


def _yes(value: str, q: Q) -> Q:
    return q if value == "yes" else ~q


def filtered(run: Run, data: dict) -> QuerySet:
    """Rollouts of ``run`` that pass the cleaned filters in ``data``, unsorted."""
    qs = Rollout.objects.filter(run=run)
    ranges = {
        "step": ("step_min", "step_max"),
        "reward": ("reward_min", "reward_max"),
        "advantage": ("adv_min", "adv_max"),
        "length": ("len_min", "len_max"),
    }
    for field, (low, high) in ranges.items():
        if data.get(low) is not None:
            qs = qs.filter(**{f"{field}__gte": data[low]})
        if data.get(high) is not None:
            qs = qs.filter(**{f"{field}__lte": data[high]})
    if data.get("first_step_below") is not None:
        qs = qs.filter(first_step_score__lt=data["first_step_below"])
    for field in ("truncated", "zero_std", "reflective"):
        if data.get(field):
            qs = qs.filter(_yes(data[field], Q(**{field: True})))
    if data.get("reflection"):
        qs = qs.filter(
            GreaterThan(F("reflection_mask").bitand(matcher(tuple(run.reflection_phrases)).bit(data["reflection"])), 0)
        )
    if data.get("label"):
        qs = qs.filter(labeled(run, data["label"]))
    if data.get("no_label"):
        qs = qs.exclude(labeled(run, data["no_label"]))
    if data.get("review"):
        qs = qs.filter(id__in=ReviewItem.objects.filter(review_id=data["review"]).values("rollout_id"))
    if data.get("prompt"):
        qs = qs.filter(prompt_key=data["prompt"])
    if data.get("ids"):
        qs = qs.filter(id__in=[int(i) for i in data["ids"].split(",")])
    if data.get("phrase"):
        qs = qs.filter(completion__has_text=InRuns(data["phrase"], [run.pk]))
    if data.get("q"):
        qs = qs.filter(text_search(data["q"], runs=[run.pk]))
    return qs


TERMS = re.compile(r'(-?)"([^"]*)"|(\S+)')


@dataclass(frozen=True)
class Term:
    text: str
    negate: bool  # -word, -"a phrase"
    or_previous: bool  # joined to the term before by ``or``


def search_terms(q: str) -> list[Term]:
    """The terms of a search in web-search syntax: words, "a phrase", -excluded, or."""
    terms: list[Term] = []
    join_next_with_or = False
    for m in TERMS.finditer(q):
        negate, quoted, word = m.group(1) == "-", m.group(2), m.group(3)
        if word and word.lower() == "or" and terms:
            join_next_with_or = True
            continue
        if word and word.startswith("-") and len(word) > 1:
            negate, word = True, word[1:]
        text = quoted if quoted is not None else word
        if not text:
            continue
        terms.append(Term(text, negate, join_next_with_or))
        join_next_with_or = False
    return terms


def text_search(q: str, fields: tuple[str, ...] = ("completion", "prompt"), *, runs=()):
    """Search of the prompt and the completion (or of ``fields``), web-search syntax (``search_terms``). Each word or
    phrase is a substring of either text, any case, found through the text index (runs.textindex), the same on
    PostgreSQL and SQLite; given ``runs`` (ids), the index is read for their rows only (the query must keep to them)."""
    clauses: list[Q] = []
    for term in search_terms(q):
        found = Q()
        text = InRuns(term.text, runs) if runs else term.text
        for field in fields:
            found |= Q(**{f"{field}__has_text": text})
        clause = ~found if term.negate else found
        if term.or_previous:
            clauses[-1] = clauses[-1] | clause
        else:
            clauses.append(clause)
    result = Q()
    for clause in clauses:
        result &= clause
    return result


FEW = 500  # rows a text's index lookup may name for the page to be made of those rows alone (text_candidates)
MANY = "many"  # text_candidates: every text is common


def text_candidates(
    runs: list[int], *, phrase: str = "", q: str = "", fields: tuple[str, ...] = ("completion", "prompt")
) -> list[int] | str | None:
    """The ids of the rows of ``runs`` that may hold a page's texts (``phrase``, in the completion, and ``q``'s words
    and phrases, in ``fields``): those of its rarest text, when the text index names at most ``FEW`` rows for it (the
    page's own filters then check every text on them). ``MANY`` when every text is common (met early in the page's
    order, read without the index); None when it cannot say (a text too short for the index, an exclusion joined with
    ``or``, no text). The longest text is tried first: the likeliest to be rare.

    A page sorted by advantage walks the run's index in that order and checks each row: for a text in forty rows of
    a million that is a walk of the whole run (SQLite: 120 ms; beside a common text: past 5 s), where the forty rows,
    fetched and sorted, cost milliseconds."""

    def holding(texts: list[str], where: tuple[str, ...]) -> list[int] | str | None:
        found: set[int] = set()
        for text in texts:
            if len(text) < MIN_INDEXED:
                return None
            if "completion" in where:  # the index's own candidates: the page checks each
                found.update(completion_candidates(connection, text, runs, FEW))
            if "prompt" in where:
                # unordered: in the model's order (step, index) the planner would walk the run's rows, not the index
                lookup = {"prompt__has_text": InRuns(text, runs)}
                rows = Rollout.objects.filter(run_id__in=runs, **lookup).order_by().values_list("id", flat=True)
                found.update(rows[: FEW + 1])
            if len(found) > FEW:
                return MANY
        return sorted(found)

    groups: list[tuple[list[str], tuple[str, ...]]] = [([phrase], ("completion",))] if phrase else []
    previous_negated = False
    for term in search_terms(q):
        if term.negate or (term.or_previous and previous_negated):
            if term.or_previous:  # "a or -b", "-a or b": not a set of rows the index names
                return None
            previous_negated = True
            continue  # an exclusion narrows the page, which the page's own filter does
        if term.or_previous and groups:
            groups[-1][0].append(term.text)
        else:
            groups.append(([term.text], fields))
        previous_negated = False
    answers = []
    for texts, where in sorted(groups, key=lambda group: -min(len(t) for t in group[0])):
        answers.append(holding(texts, where))
        if isinstance(answers[-1], list):
            return answers[-1]
    return MANY if answers and all(a == MANY for a in answers) else None


def text_first(page, candidates) -> list[int]:
    """``page(ids)`` read under the time limit (``guarded``), its text found the fastest way: ``candidates()``
    (``text_candidates``) first; a rare text's few rows given as ``ids``, each text checked on the rows themselves;
    a common one (MANY: its index lookup would name a million rows) read in the page's order, ``ids`` None, without
    the index. The second try does the other: the index's way after a common text's read that did not fill the page
    (common in other runs, rare in these), the page's order otherwise."""
    common = []

    def read() -> list[int]:
        second = SCAN_ONLY.get()
        found = None if second else candidates()
        if found == MANY:
            common.append(True)
        rows = isinstance(found, list)  # a rare text's rows, sorted (no planner setting in the way)
        in_order = bool(common) != second  # the page's order, from the index that holds it: one try of the two
        if connection.vendor == "postgresql":  # guarded set these for its try: this read decides
            with connection.cursor() as cursor:
                for setting in ("enable_bitmapscan", "enable_sort"):
                    cursor.execute(f"SET LOCAL {setting} = {'off' if in_order and not rows else 'on'}")
        token = SCAN_ONLY.set(rows or bool(in_order))
        try:
            return page(found if rows else None)
        finally:
            SCAN_ONLY.reset(token)

    return guarded(read, text=True)


MAX_HITS = 200  # marked occurrences of the searched text a completion shows at most


def searched_texts(data: dict) -> list[str]:
    """The texts a filtered page was searched for (``phrase``, and the words and phrases of ``q`` it must hold)."""
    texts = [data["phrase"]] if data.get("phrase") else []
    texts += [term.text for term in search_terms(data.get("q") or "") if not term.negate]
    return list(dict.fromkeys(texts))


def hit_spans(text: str, searched: list[str]) -> list[list[int]]:
    """[[start, end], ...] of each occurrence of a searched text in ``text``, any case, as the filter matched it, in
    UTF-16 code units (JavaScript string offsets), merged and in order; at most ``MAX_HITS``."""
    found: list[tuple[int, int]] = []
    for needle in searched:
        for m in re.finditer(re.escape(needle), text, re.IGNORECASE):
            found.append((m.start(), m.end()))
            if len(found) >= MAX_HITS * 2:
                break
    return js_spans(text, found, MAX_HITS)


# --- sorted keyset pages -----------------------------------------------------------------------------------------


def _parse_cursor(cursor: str, sort: str):
    field, _, tie = SORTS.get(sort, SORTS["adv_desc"])
    value, sep, last = cursor.rpartition("~")
    try:
        parsed = int(value) if field == "step" else float(value)
        return parsed, int(last)
    except ValueError:
        return None


def _cursor(row: dict, sort: str) -> str:
    field, _, tie = SORTS[sort]
    return f"{row[field]!r}~{row[tie]}"


def sorted_rows(qs: QuerySet, sort: str, after: str = "") -> QuerySet:
    """``qs`` in the order of ``sort``, starting after the cursor ``after``."""
    field, desc, tie = SORTS[sort]
    if field == "reward":
        qs = qs.filter(reward__isnull=False)  # unscorable completions (every function abstained) have no place
    if after:
        value, last = _parse_cursor(after, sort)
        op = "lt" if desc else "gt"
        # the first condition alone is what the index can seek to; the second picks up past the tie
        qs = qs.filter(**{f"{field}__{op}e": value}).filter(
            Q(**{f"{field}__{op}": value}) | Q(**{field: value, f"{tie}__{op}": last})
        )
    prefix = "-" if desc else ""
    return qs.order_by(f"{prefix}{field}", f"{prefix}{tie}")


@dataclass
class RolloutPage:
    rows: list[dict]
    next_cursor: str  # "" on the last page


BROWSER_FIELDS = (
    "id",
    "step",
    "index",
    "group",
    "prompt",
    "prompt_key",
    "completion",
    "rewards",
    "reward",
    "advantage",
    "length",
    "truncated",
    "zero_std",
    "reflections",
    "columns",
    "step_scores",
    "messages",
)


def rollout_page(run: Run, data: dict, *, size: int | None = None) -> RolloutPage:
    """One page: the ids first, then those rows. Sorted by advantage on PostgreSQL, the ids come from the index
    (run, reward_bucket, advantage, id, <the numeric and yes/no filters>) one reward bucket at a time: each bucket's
    next page is a seek into the index, and checking the filters there reads no row that is not kept (an index-only
    scan); the buckets' pages merge into one. Text filters have to read rows, under a time limit."""
    size = size or PAGE_SIZE
    sort = data.get("sort") or "adv_desc"
    after = data.get("after") or ""
    qs = filtered(run, data)

    def page(candidates: list[int] | None) -> list[int]:
        if candidates is not None:  # a rare text's few rows, sorted here (however many rows the run has)
            return list(sorted_rows(qs.filter(id__in=candidates), sort, after).values_list("id", flat=True)[: size + 1])
        if connection.vendor in ("postgresql", "sqlite") and SORTS[sort][0] == "advantage":
            ids_qs = _by_bucket(run, qs, data, sort, after, size + 1)
        else:
            ids_qs = sorted_rows(qs, sort, after).values_list("id", flat=True)[: size + 1]
        return [r if isinstance(r, int) else r[0] for r in ids_qs]

    if data.get("phrase") or data.get("q"):
        ids = text_first(
            page, lambda: text_candidates([run.pk], phrase=data.get("phrase") or "", q=data.get("q") or "")
        )
    else:  # sorting by reward reads rows rather than an index: under the time limit too
        ids = guarded(lambda: page(None), text=SORTS[sort][0] == "reward")
    by_id = {r["id"]: r for r in Rollout.objects.filter(run=run, id__in=ids).values(*BROWSER_FIELDS)}
    rows = [by_id[i] for i in ids]
    more = len(rows) > size
    rows = rows[:size]
    return RolloutPage(rows=rows, next_cursor=_cursor(rows[-1], sort) if more else "")


def _by_bucket(run: Run, qs: QuerySet, data: dict, sort: str, after: str, limit: int):
    """The first ``limit`` (id, advantage) of ``qs`` in advantage order: a UNION ALL of each reward bucket's own
    first ``limit`` (each an index seek), merged."""
    # the run's lowest and highest bucket, each an index seek (SQLite reads every entry of the run for a MIN and a
    # MAX asked together: 95 ms at a million rows)
    scored = Rollout.objects.filter(run=run, reward_bucket__isnull=False).values_list("reward_bucket", flat=True)
    lo, hi = scored.order_by("reward_bucket").first(), scored.order_by("-reward_bucket").first()
    parts = []
    if lo is not None:
        if data.get("reward_min") is not None:
            lo = max(lo, reward_bucket(data["reward_min"]))
        if data.get("reward_max") is not None:
            hi = min(hi, reward_bucket(data["reward_max"]))
        parts = [qs.filter(reward_bucket=b) for b in range(lo, hi + 1)]
    if data.get("reward_min") is None and data.get("reward_max") is None:
        parts.append(qs.filter(reward_bucket__isnull=True))  # unscorable completions
    parts = [sorted_rows(part, sort, after).values_list("id", "advantage")[:limit] for part in parts]
    if not parts:
        return []
    if connection.vendor == "sqlite":
        # SQLite cannot order and cut the parts of a UNION ALL (Django refuses it): each bucket is read on its own,
        # in the index's order, and the pages merge here
        return _Merged(parts, descending=bool(SORTS[sort][1]), limit=limit)
    if len(parts) == 1:  # a reward range within one bucket: already in order (a sliced query cannot be reordered)
        return parts[0]
    prefix = "-" if SORTS[sort][1] else ""
    return parts[0].union(*parts[1:], all=True).order_by(f"{prefix}advantage", f"{prefix}id")[:limit]


@dataclass
class _Merged:
    """The first ``limit`` (id, advantage) of several buckets' pages, in advantage order, read when iterated."""

    parts: list
    descending: bool
    limit: int

    def __iter__(self):
        rows = [row for part in self.parts for row in part]
        rows.sort(key=lambda row: (row[1], row[0]), reverse=self.descending)
        return iter(rows[: self.limit])


def guarded(read, *, text: bool):
    """Run ``read()``; a slow kind of read (``text``) runs under a time limit (SearchTooSlow past it), in two tries.
    First as the planner likes, the text index first, for ``FIRST_TRY_MS``: a rare text is found at once. A common
    text gives the index more rows to check than its first page needs; past that time the read is made again in the
    browser's order without the text index (PostgreSQL: no bitmap scans; SQLite: no FTS5 table), which meets a
    common text's first page early, for the rest of ``SEARCH_TIMEOUT_MS``. PostgreSQL's statement timeout bounds each
    try; SQLite's progress handler does (SQLite has no statement timeout)."""
    if not text or connection.vendor not in ("postgresql", "sqlite"):
        return read()
    tries = ((FIRST_TRY_MS, False), (SEARCH_TIMEOUT_MS - FIRST_TRY_MS, True))
    for ms, scan_only in tries:
        token = SCAN_ONLY.set(scan_only)
        try:
            if connection.vendor == "sqlite":
                return _bounded_sqlite(read, ms)
            return _bounded_postgresql(read, ms, scan_only)
        except _TimedOut:
            continue
        finally:
            SCAN_ONLY.reset(token)
    raise SearchTooSlow(
        f"this page took more than {SEARCH_TIMEOUT_MS / 1000:g} s to fill: narrow it with a "
        f"step range, a reward range or a longer phrase, or sort by advantage"
    )


class _TimedOut(Exception):
    pass


def _bounded_postgresql(read, ms: float, scan_only: bool):
    try:
        with transaction.atomic():  # SET LOCAL ends with it (or with its savepoint, inside a transaction)
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL statement_timeout = {max(1, int(ms))}")
                # every read here is of one run (or of a user's runs), which an index finds: a sequential scan of
                # the whole table is never the plan (the planner picks one for a small table, and cannot tell how
                # common a text is)
                cursor.execute("SET LOCAL enable_seqscan = off")
                # the cost a switched-off plan carries (10^10) would make PostgreSQL compile the query (JIT): some
                # 700 ms for a page read in 25
                cursor.execute("SET LOCAL jit = off")
                if scan_only:  # in the browser's order, from the index that holds it
                    cursor.execute("SET LOCAL enable_bitmapscan = off")
                    cursor.execute("SET LOCAL enable_sort = off")
            result = read()
            with connection.cursor() as cursor:  # a savepoint released keeps them otherwise
                cursor.execute("SET LOCAL statement_timeout TO DEFAULT")
                cursor.execute("SET LOCAL enable_bitmapscan TO DEFAULT")
                cursor.execute("SET LOCAL enable_seqscan TO DEFAULT")
                cursor.execute("SET LOCAL enable_sort TO DEFAULT")
                cursor.execute("SET LOCAL jit TO DEFAULT")
            return result
    except OperationalError as exc:
        if "statement timeout" in str(exc):
            raise _TimedOut from None
        raise


def _bounded_sqlite(read, ms: float):
    """SQLite's progress handler, called every few thousand steps of the query, stops it past ``ms`` (the query
    ends with "interrupted")."""
    connection.ensure_connection()
    raw = connection.connection
    deadline = time.monotonic() + ms / 1000
    raw.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        return read()
    except OperationalError as exc:
        if "interrupted" in str(exc):
            raise _TimedOut from None
        raise
    finally:
        raw.set_progress_handler(None, 0)
