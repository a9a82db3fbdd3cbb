"""The JSON API over what a run logged: metrics, a step's groups, rollouts with the browser's filters and their
export (grpo_web/api.py mounts this router at /api/)."""

from __future__ import annotations

import json

from django.http import StreamingHttpResponse
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError
from pydantic import Field

from runs.access import async_chunks, visible_run
from runs.models import Run
from runs.rollouts import inspection, labels, verdicts
from runs.rollouts import selectors as rollout_selectors
from runs.rollouts.exports import jsonl_chunks, parquet_chunks
from runs.rollouts.filters import RolloutFilterForm, SearchTooSlow, rollout_page, unknown_filters
from runs.rollouts.search import SearchForm, search_runs

router = Router()


@router.get(
    "/runs/{int:run_id}/metrics",
    response=dict,
    tags=["metrics"],
    summary="TRL's logged metrics per step; smooth: TensorBoard's smoothing weight",
)
def run_metrics(request, run_id: int, smooth: float = Query(0.0, ge=0, lt=1)):
    return rollout_selectors.metric_series(visible_run(request, run_id), smooth=smooth)


@router.get(
    "/runs/{int:run_id}/steps/{int:step}",
    response=dict,
    tags=["rollouts"],
    summary="A page of one step's groups: completions, per-function rewards, advantages",
)
def run_step(
    request,
    run_id: int,
    step: int,
    first_group: int = Query(0, ge=0, alias="from"),
    groups: int = Query(rollout_selectors.STEP_GROUPS_PAGE, ge=1, le=256),
):
    run = visible_run(request, run_id)
    return {
        "step": step,
        "reward_names": run.reward_names,
        "scale_rewards": run.config.get("scale_rewards"),
        "aggregation": run.config.get("multi_objective_aggregation", "sum_then_normalize"),
        **rollout_selectors.step_view(run, step, first_group=first_group, groups=groups),
    }


class RolloutFilters(Schema):
    """The rollout browser's filters, under the same names as its URL."""

    step_min: int | None = Field(None, ge=0)
    step_max: int | None = Field(None, ge=0)
    reward_min: float | None = None
    reward_max: float | None = None
    adv_min: float | None = Field(None, description="advantage ≥")
    adv_max: float | None = Field(None, description="advantage ≤")
    len_min: int | None = Field(None, ge=0, description="completion tokens ≥")
    len_max: int | None = Field(None, ge=0, description="completion tokens ≤")
    first_step_below: float | None = Field(None, description="the first scored reasoning step's process score <")
    truncated: str | None = Field(None, description="yes or no")
    zero_std: str | None = Field(None, description="yes or no: in a zero-variance group")
    reflective: str | None = Field(None, description="yes or no: has a self-reflection phrase")
    reflection: str | None = Field(None, description="one of the run's reflection phrases")
    phrase: str | None = Field(None, description="completion contains (exact text)")
    q: str | None = Field(None, description="full-text search of the prompt and the completion")
    label: str | None = Field(None, description="a reviewer's label, on the rollout or on its group")
    no_label: str | None = Field(None, description="leave out the rollouts with this label (on them or their group)")
    review: int | None = Field(None, ge=1, description="the rollouts of one review queue")
    prompt: str | None = Field(None, description="a prompt key")
    ids: str | None = Field(None, description="rollout ids, comma-separated (a detector's examples)")
    sort: str | None = Field(None, description="the browser's sort keys")
    after: str | None = Field(None, description="the cursor of the next page (next_cursor)")


class RolloutsOut(Schema):
    reward_names: list[str]
    rows: list[dict]
    next_cursor: str | None = Field(description="Pass as after= for the next page; null on the last page.")


def _filters(request, run: Run, also: tuple[str, ...] = ()):
    # a key that is no filter is refused: a typo (stepmin=) must not quietly select every row
    problem = unknown_filters(request.GET, also)
    if problem:
        raise HttpError(400, problem)
    # the browser's own form validates, so the API and the page can never disagree on what a filter means
    form = RolloutFilterForm(request.GET, run=run)
    if not form.is_valid():
        raise HttpError(400, "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()))
    return form.cleaned_data


@router.get(
    "/runs/{int:run_id}/rollouts",
    response=RolloutsOut,
    tags=["rollouts"],
    summary="Stored rollouts with the rollout browser's filters, a page at a time",
)
def run_rollouts(request, run_id: int, filters: Query[RolloutFilters]):
    run = visible_run(request, run_id)
    try:
        page = rollout_page(run, _filters(request, run))
    except SearchTooSlow as exc:
        raise HttpError(422, str(exc)) from None
    names = run.reward_names
    on = labels.labels_of_rows(run, page.rows, request.user)
    rows = [{**r, "rewards": dict(zip(names, r["rewards"])), "labels": on[r["id"]]} for r in page.rows]
    return {"reward_names": names, "rows": rows, "next_cursor": page.next_cursor or None}


@router.get(
    "/runs/{int:run_id}/rollouts/export",
    tags=["rollouts"],
    openapi_extra={
        "responses": {
            200: {
                "description": "The rows, streamed",
                "content": {
                    "application/x-ndjson": {"schema": {"type": "string"}},
                    "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}},
                },
            }
        }
    },
    summary="Every rollout the filters select, as JSON lines (format=jsonl) or Parquet (format=parquet)",
)
def run_rollouts_export(
    request, run_id: int, filters: Query[RolloutFilters], format: str = Query("jsonl", pattern="^(jsonl|parquet)$")
):
    run = visible_run(request, run_id)
    data = _filters(request, run, also=("format",))
    chunks, content_type = (
        (jsonl_chunks, "application/x-ndjson")
        if format == "jsonl"
        else (parquet_chunks, "application/vnd.apache.parquet")
    )
    response = StreamingHttpResponse(async_chunks(chunks(run, data)), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-rollouts.{format}"'
    return response


class SearchHit(Schema):
    rollout_id: int
    run_id: int
    run_name: str
    step: int
    index: int
    group: int
    where: str
    snippet: str


class SearchOut(Schema):
    hits: list[SearchHit]
    next_cursor: int | None


@router.get(
    "/search/rollouts",
    response=SearchOut,
    tags=["rollouts"],
    summary="Completions and prompts holding a text across the runs you may see, newest first",
    description='q: words in any order, "a phrase", -excluded, or (any case); where: both, completion or prompt; '
    "after: the next_cursor of the page before.",
)
def search_rollouts(request, q: str, where: str = "both", after: int | None = None):
    form = SearchForm({"q": q, "where": where, "after": after})
    if not form.is_valid():
        raise HttpError(400, "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()))
    data = form.cleaned_data
    try:
        page = search_runs(request.user, data["q"], where=data["where"] or "both", after=data["after"])
    except SearchTooSlow as exc:
        raise HttpError(422, str(exc)) from None
    return {"hits": [vars(h) for h in page.hits], "next_cursor": page.next_cursor}


# --- labels (runs.rollouts.labels) -------------------------------------------------------------------------------


class LabelsOut(Schema):
    labels: list[dict]
    next_cursor: int | None = Field(description="Pass as after= for the next page; null on the last page.")


class LabelsStored(Schema):
    created: int = Field(description="Labels stored by this request.")
    existing: int = Field(description="Labels you had already put there (same target, name and span): kept once.")
    labels: list[dict]


def json_body(request):
    """The request's JSON body; 400 naming why it is not JSON (never a 500, whatever was sent). The review API's
    bodies are read with it too."""
    try:
        return json.loads(request.body)
    except RecursionError:
        raise HttpError(400, "the body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(400, f"the body is not JSON: {exc}") from None


@router.get(
    "/runs/{int:run_id}/labels",
    response=LabelsOut,
    tags=["labels"],
    summary="The run's labels, oldest first, 500 a page; name: one label's only",
)
def run_labels(request, run_id: int, after: int = Query(0, ge=0), name: str = Query("", max_length=200)):
    run = visible_run(request, run_id)
    try:
        name = labels.clean_name(name) if name.strip() else ""
    except ValueError as exc:
        raise HttpError(400, f"name: a label name {exc}") from None
    rows, cursor = labels.labels_page(run, request.user, after=after, name=name)
    return {"labels": rows, "next_cursor": cursor}


@router.post(
    "/runs/{int:run_id}/labels",
    response={201: LabelsStored},
    tags=["labels"],
    summary="Label rollouts, groups or steps: all the labels sent are stored, or none",
    description='Body: {"labels": [{"name": "reward hack", "rollout": 123, "note": "...", "span": [10, 42]}, '
    '{"name": "garbled", "step": 7, "group": 3}, {"name": "format only", "step": 9}]}; at most 1,000 a '
    "request. span: [start, end) of the completion in UTF-16 units (JavaScript string offsets). Anyone who may "
    "see the run may label it; a label you already put there is not stored twice.",
)
def run_labels_create(request, run_id: int):
    run = visible_run(request, run_id)
    body = json_body(request)
    items = body.get("labels") if isinstance(body, dict) else None
    if not isinstance(body, dict) or set(body) != {"labels"}:
        raise HttpError(400, 'send {"labels": [...]}: a list of labels, each with name and a target')
    try:
        stored = labels.labels_create(run=run, user=request.user, items=items)
    except labels.LabelError as exc:
        raise HttpError(400, str(exc)) from None
    names = {request.user.pk: request.user.get_username()}
    out = [labels.label_json(lab, names, request.user) for lab in stored.created + stored.existing]
    return Status(201, {"created": len(stored.created), "existing": len(stored.existing), "labels": out})


@router.delete(
    "/runs/{int:run_id}/labels/{int:label_id}",
    response={204: None},
    tags=["labels"],
    summary="Remove one of your labels",
)
def run_label_delete(request, run_id: int, label_id: int):
    run = visible_run(request, run_id)
    try:
        labels.label_delete(run=run, user=request.user, label_id=label_id)
    except LookupError as exc:
        raise HttpError(404, str(exc)) from None
    except PermissionError as exc:
        raise HttpError(403, str(exc)) from None
    return Status(204, None)


@router.get(
    "/runs/{int:run_id}/labels/counts",
    response=dict,
    tags=["labels"],
    summary="Each label's count per step, the most used first; names: what a reviewer is offered",
)
def run_label_counts(request, run_id: int):
    run = visible_run(request, run_id)
    return {**labels.label_counts(run), "names": labels.label_names(run, request.user)}


@router.post(
    "/runs/{int:run_id}/alerts/verdicts",
    response={201: dict},
    tags=["labels"],
    summary="Confirm or dismiss a health or detector alert: its rollouts are labeled, a dismissal holds for its evidence",
    description='Body: {"key": "detector/repetition", "evidence": "<the alert\'s evidence from health.json>", '
    '"verdict": "confirm" or "dismiss", "note": ""}.',
)
def run_alert_verdict(request, run_id: int):
    run = visible_run(request, run_id)
    body = json_body(request)
    if not isinstance(body, dict) or set(body) - {"key", "evidence", "verdict", "note"}:
        raise HttpError(400, 'send {"key", "evidence", "verdict": "confirm" or "dismiss", "note"}')
    key, evidence, verdict, note = (body.get(k) for k in ("key", "evidence", "verdict", "note"))
    if not all(isinstance(v, str) for v in (key, evidence, verdict)) or not isinstance(note or "", str):
        raise HttpError(400, "key, evidence, verdict and note are text")
    try:
        labeled = verdicts.alert_verdict(
            run=run,
            user=request.user,
            signals=inspection.run_health(run),
            key=key,
            evidence=evidence,
            verdict=verdict,
            note=(note or "")[:4000],
        )
    except LookupError as exc:
        raise HttpError(404, str(exc)) from None
    except (ValueError, labels.LabelError) as exc:
        raise HttpError(400, str(exc)) from None
    return Status(201, {"verdict": verdict, "labeled": labeled})
