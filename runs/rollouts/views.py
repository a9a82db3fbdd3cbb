"""Inspection pages of one run: the rollout browser (and its exports and rejection sampling), the self-reflection
tracker, prompt history, and the health signals. Each page is a template plus a JSON endpoint its module draws
from; every URL holds the page's state, so it can be shared."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib import messages
from django.db.models import Count, F, Q
from django.db.models.functions import Abs
from django.http import Http404, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from rewards.models import RewardFunctionVersion
from runs.access import async_chunks, visible_run, writable_run
from runs.datasets.importing import DatasetError
from runs.models import Replay, Rollout
from runs.rollouts import inspection
from runs.rollouts.detectors import ThresholdsForm
from runs.rollouts.exports import jsonl_chunks, parquet_chunks
from runs.rollouts.filters import (
    RolloutFilterForm,
    SearchTooSlow,
    hit_spans,
    rollout_page,
    searched_texts,
    unknown_filters,
)
from runs.rollouts.groups import formula
from runs.rollouts.label_suites import replay_agreement
from runs.rollouts.labels import label_names, labels_of_rows, labels_page_latest
from runs.rollouts.reflection import clean_phrases, matcher
from runs.rollouts.search import SearchForm, search_runs
from runs.rollouts.selectors import replay_rewards_shown, replay_values, run_formula, whole_number
from runs.rollouts.services import (
    dataset_from_rollouts,
    replay_create,
    replay_reward_external,
    run_detector_thresholds_update,
    run_reflection_phrases_update,
)
from runs.rollouts.tokens import step_tokens
from runs.rollouts.verdicts import with_verdicts


def _number(value, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if number == number and abs(number) != float("inf") else default


# --- the rollout browser -----------------------------------------------------------------------------------------


@require_GET
def run_rollouts(request, pk):
    run = visible_run(request, pk)
    form = RolloutFilterForm(request.GET or None, run=run)
    form.is_valid()
    problem = unknown_filters(request.GET)  # said on the page, which shows no rows for it (rollouts.json refuses)
    params = request.GET.copy()
    params.pop("after", None)
    return render(
        request,
        "rollouts/run_rollouts.html",
        {
            "run": run,
            "form": form,
            "unknown_filters": problem,
            "formula": run_formula(run),
            "filter_query": params.urlencode(),
            "replay_rewards": _replay_choices(run),
            "label_names": label_names(run, request.user),
        },
        status=400 if problem else 200,
    )


def _replay_choices(run) -> list[dict]:
    """The replay form's rows: each reward of the run with its weight and, for a user's function, its versions."""
    pinned = RewardFunctionVersion.objects.in_bulk([r["version_id"] for r in run.rewards if r.get("version_id")])
    choices = []
    for i, r in enumerate(run.rewards):
        version = pinned.get(r.get("version_id"))
        versions = (
            list(RewardFunctionVersion.objects.filter(function_id=version.function_id).values_list("pk", "number"))
            if version
            else []
        )
        choices.append(
            {
                "i": i,
                "name": r["name"],
                "weight": r.get("weight", 1.0),
                "version_id": r.get("version_id"),
                "versions": versions,
                # a run trained elsewhere: the source its client sent, to replay as it is or edited; none came:
                # it cannot be re-scored
                "external": bool(r.get("external")),
                "source": r.get("source") or "",
            }
        )
    return choices


def _filter_data(request, run) -> tuple[dict | None, JsonResponse | None]:
    problem = unknown_filters(request.GET)
    if problem:  # refused, as the API refuses it
        return None, JsonResponse({"errors": {"filters": [problem]}}, status=400)
    form = RolloutFilterForm(request.GET, run=run)
    if not form.is_valid():
        return None, JsonResponse({"errors": {k: [str(e) for e in v] for k, v in form.errors.items()}}, status=400)
    return form.cleaned_data, None


@require_GET
def run_rollouts_json(request, pk):
    run = visible_run(request, pk)
    data, error = _filter_data(request, run)
    if error:
        return error
    try:
        page = rollout_page(run, data)
    except SearchTooSlow as exc:
        return JsonResponse({"errors": {"page": [str(exc)]}}, status=422)
    names, spans = run.reward_names, matcher(tuple(run.reflection_phrases)).spans
    searched = searched_texts(data)  # marked in each completion, the first scrolled to
    # ?replay=N: a reward replay's values beside the stored ones
    replayed = replay_values(run, request.GET.get("replay", ""), rollout_id__in=[r["id"] for r in page.rows])
    by_id = {r["rollout_id"]: r for r in replayed or []}
    on = labels_of_rows(run, page.rows, request.user)
    rows = []
    for r in page.rows:
        r["labels"] = on[r["id"]]
        columns = r.pop("columns", None) or {}
        if isinstance(columns.get("code_tests"), list):  # the code_tests reward's outcome per test
            r["code_tests"] = columns["code_tests"]
        if replayed is not None:
            r["replay"] = by_id.get(r["id"])
        r["rewards"] = dict(zip(names, r["rewards"]))
        r["spans"] = spans(r["completion"])
        r["hits"] = hit_spans(r["completion"], searched) if searched else []
        r["group_url"] = f"{reverse('run_detail', args=[run.pk])}?step={r['step']}#group-{r['group']}"
        r["prompt_url"] = reverse("run_prompt", args=[run.pk, r["prompt_key"]])
        rows.append(r)
    params = request.GET.copy()
    params.pop("after", None)
    next_url = ""
    if page.next_cursor:
        params["after"] = page.next_cursor
        next_url = f"{reverse('run_rollouts', args=[run.pk])}?{params.urlencode()}"
    return JsonResponse({"reward_names": names, "rows": rows, "next": next_url, "next_cursor": page.next_cursor})


def _export(request, pk, chunks, content_type: str, ext: str):
    run = visible_run(request, pk)
    data, error = _filter_data(request, run)
    if error:
        return error
    response = StreamingHttpResponse(async_chunks(chunks(run, data)), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-rollouts.{ext}"'
    return response


@require_GET
def run_rollouts_jsonl(request, pk):
    return _export(request, pk, jsonl_chunks, "application/x-ndjson", "jsonl")


@require_GET
def run_rollouts_parquet(request, pk):
    return _export(request, pk, parquet_chunks, "application/vnd.apache.parquet", "parquet")


def _posted_filters(request, run) -> tuple[dict | None, str]:
    """The browser's filters a form posted in its query string (None, with a message, when they are not valid), and
    the browser's address to go back to."""
    data, error = _filter_data(request, run)
    if error:
        messages.error(request, "The filters are not valid.")
    return (None if error else data), f"{reverse('run_rollouts', args=[run.pk])}?{request.GET.urlencode()}"


@require_POST
def run_rollouts_sft(request, pk):
    """Rejection sampling into a new SFT dataset; the filters come in the query string, the threshold in the form."""
    run = visible_run(request, pk)
    data, back = _posted_filters(request, run)
    if data is None:
        return redirect(back)
    threshold = _number(request.POST.get("threshold"), None)
    if threshold is None:
        messages.error(request, "Give a reward threshold.")
        return redirect(back)
    try:
        version = dataset_from_rollouts(
            run=run, data=data, threshold=threshold, name=request.POST.get("name", "").strip()[:200]
        )
    except DatasetError as exc:
        messages.error(request, "; ".join(exc.errors))
        return redirect(back)
    messages.success(request, f"Saved {version.row_count} completions with reward ≥ {threshold:g} as a new dataset.")
    return redirect(version)


# --- labels ------------------------------------------------------------------------------------------------------


@require_GET
def run_labels(request, pk):
    """The run's labels: each one's count per step (drawn from /api/runs/<id>/labels/counts) and the latest made."""
    run = visible_run(request, pk)
    latest = labels_page_latest(run, request.user)
    reviews = [
        {"review": r, "done": r.done}
        for r in run.reviews.annotate(done=Count("items", filter=Q(items__done_at__isnull=False)))[:50]
    ]
    return render(request, "rollouts/run_labels.html", {"run": run, "latest": latest, "reviews": reviews})


# --- self-reflection ---------------------------------------------------------------------------------------------


def run_reflection(request, pk):
    # changing the phrase list re-tags the run's stored completions: a change to the run
    run = writable_run(request, pk) if request.method == "POST" else visible_run(request, pk)
    error = ""
    if request.method == "POST":
        text = request.POST.get("phrases", "")
        try:
            phrases = clean_phrases(text.splitlines())
        except ValueError as exc:
            error = str(exc)
        else:
            queued = run_reflection_phrases_update(run=run, phrases=phrases)
            messages.success(
                request,
                "Saved the phrase list; "
                + ("a worker is re-tagging the stored completions." if queued else "stored completions re-tagged."),
            )
            return redirect("run_reflection", pk=run.pk)
    else:
        text = "\n".join(run.reflection_phrases)
    return render(
        request,
        "rollouts/run_reflection.html",
        {"run": run, "phrases_text": text, "error": error},
        status=400 if error else 200,
    )


@require_GET
def run_reflection_json(request, pk):
    return JsonResponse(inspection.reflection_tracker(visible_run(request, pk)))


# --- prompts -----------------------------------------------------------------------------------------------------


def _criterion_args(request) -> dict:
    return {
        "solved_by": request.GET.get("solved_by", "")[:200],
        "threshold": _number(request.GET.get("threshold"), 1.0),
    }


@require_GET
def run_prompts(request, pk):
    run = visible_run(request, pk)
    return render(
        request, "rollouts/run_prompts.html", {"run": run, "query": request.GET.urlencode(), **_criterion_args(request)}
    )


@require_GET
def run_prompts_json(request, pk):
    run = visible_run(request, pk)
    try:
        return JsonResponse(inspection.flipped_prompts(run, **_criterion_args(request)))
    except ValueError as exc:
        return JsonResponse({"errors": {"solved_by": [str(exc)]}}, status=400)


@require_GET
def run_prompt(request, pk, key):
    run = visible_run(request, pk)
    if not run.rollouts.filter(prompt_key=key).exists():
        raise Http404
    return render(
        request,
        "rollouts/run_prompt.html",
        {
            "run": run,
            "key": key,
            "query": request.GET.urlencode(),
            "browse_url": f"{reverse('run_rollouts', args=[run.pk])}?{urlencode({'prompt': key, 'sort': 'step_asc'})}",
        },
    )


@require_GET
def run_prompt_json(request, pk, key):
    run = visible_run(request, pk)
    try:
        history = inspection.prompt_history(run, key, **_criterion_args(request))
    except ValueError as exc:
        return JsonResponse({"errors": {"solved_by": [str(exc)]}}, status=400)
    if history is None:
        raise Http404
    return JsonResponse(history)


# --- health ------------------------------------------------------------------------------------------------------


def run_detectors(request, pk):
    """The reward-hacking detectors' thresholds for this run; the alerts themselves are health signals."""
    run = writable_run(request, pk) if request.method == "POST" else visible_run(request, pk)
    form = ThresholdsForm(request.POST if request.method == "POST" else None, run=run)
    if request.method == "POST" and form.is_valid():
        run_detector_thresholds_update(run=run, thresholds=form.changed_thresholds())
        messages.success(request, "Saved the detector thresholds.")
        return redirect("run_detectors", pk=run.pk)
    return render(
        request, "rollouts/run_detectors.html", {"run": run, "form": form}, status=400 if form.errors else 200
    )


@require_GET
def run_health_json(request, pk):
    run = visible_run(request, pk)
    signals = with_verdicts(run, inspection.run_health(run))  # a dismissed alert goes to the end
    return JsonResponse({"signals": sorted(signals, key=lambda s: inspection.SEVERITY.get(s["level"], 1))})


@require_GET
def run_zero_variance_json(request, pk):
    """Zero-variance groups per step, split into all right and all wrong (the run page's Metrics tab draws it)."""
    return JsonResponse(inspection.zero_variance_split(visible_run(request, pk)))


# --- the token-level view ---------------------------------------------------------------------------------------


@require_GET
def run_step_tokens_json(request, pk, step):
    """The per-token values TRL computed at optimizer step ``step`` for the completions it kept (``?group=G``: of one
    group): log-probabilities, entropy, ratio, clipping, and each completion's most clipped and least probable
    tokens. The run page's group view colours tokens by them."""
    run = visible_run(request, pk)
    group = request.GET.get("group", "")
    if group and not group.isdigit():
        return JsonResponse({"errors": {"group": ["give a group number"]}}, status=400)
    return JsonResponse(step_tokens(run, step, int(group) if group else None))


# --- reward replay -----------------------------------------------------------------------------------------------

REPLAY_ROWS_SHOWN = 500


def _replay_rewards(request, run) -> list[dict]:
    """The run's reward list with the weights and versions posted (weight-<i>, version-<i>); a version must be one
    of the same function's, visible to the user. A run trained elsewhere: its functions' sources as posted
    (source-<i>, the one it came with by default). ValueError on a bad value."""
    rewards = []
    for i, r in enumerate(run.rewards):
        weight = _number(request.POST.get(f"weight-{i}", r.get("weight", 1.0)), None)
        if weight is None:
            raise ValueError(f"weight of {r['name']}: give a number")
        if r.get("external"):
            rewards.append(replay_reward_external(r, weight, request.POST.get(f"source-{i}")))
            continue
        entry = {**r, "weight": weight}
        version = request.POST.get(f"version-{i}", "")
        if version and r.get("version_id"):
            pinned = RewardFunctionVersion.objects.filter(pk=r["version_id"]).first()
            chosen = RewardFunctionVersion.objects.filter(
                pk=whole_number(version) or 0, function_id=pinned.function_id if pinned else None
            ).first()
            if chosen is None:
                raise ValueError(f"version of {r['name']}: not one of that function's versions")
            entry["version_id"] = chosen.pk
        rewards.append(entry)
    return rewards


@require_POST
def run_replay_new(request, pk):
    """Start a replay of the steps the browser's filters (the query string) select, with the posted weights and
    versions."""
    run = writable_run(request, pk)
    data, back = _posted_filters(request, run)
    if data is None:
        return redirect(back)
    try:
        replay = replay_create(run=run, owner=request.user, rewards=_replay_rewards(request, run), filters=data)
    except ValueError as exc:
        messages.error(request, f"No replay: {exc}.")
        return redirect(back)
    return redirect(replay)


def _visible_replay(request, pk, replay_id):
    run = visible_run(request, pk)
    replay = Replay.objects.filter(run=run, pk=replay_id).first()
    if replay is None:
        raise Http404
    return run, replay


@require_GET
def run_replay(request, pk, replay_id):
    run, replay = _visible_replay(request, pk, replay_id)
    return render(
        request,
        "rollouts/run_replay.html",
        {
            "run": run,
            "replay": replay,
            "rewards": replay_rewards_shown(replay),
            "formula": formula(run.config.get("scale_rewards"), run.config.get("multi_objective_aggregation")),
        },
    )


@require_GET
def run_replay_json(request, pk, replay_id):
    """Progress, the per-step summary, and the rows whose advantage moved most (all of them up to 500)."""
    run, replay = _visible_replay(request, pk, replay_id)
    rows = list(
        replay.rows.annotate(moved=Abs(F("new_advantage") - F("old_advantage")))
        .order_by("-moved", "step", "index")
        .values(
            "rollout_id",
            "step",
            "index",
            "group",
            "old_reward",
            "new_reward",
            "old_advantage",
            "new_advantage",
            "old_rank",
            "new_rank",
        )[:REPLAY_ROWS_SHOWN]
    )
    base = reverse("run_detail", args=[run.pk])
    for r in rows:
        r["group_url"] = f"{base}?step={r['step']}#group-{r['group']}"
    return JsonResponse(
        {
            "status": replay.status,
            "done": replay.done,
            "total": replay.total,
            "error": replay.error,
            "steps": replay.steps,
            "rewards": replay_rewards_shown(replay),
            "summary": replay.summary,
            "rows": rows,
            # each replayed reward's agreement with its function's label suite, stored values beside replayed ones
            "labels": replay_agreement(replay) if replay.status == Replay.Status.COMPLETED else [],
        }
    )


@require_GET
def run_replay_jsonl(request, pk, replay_id):
    """The replay, one line per completion: its stored and replayed rewards, advantages and ranks."""
    run, replay = _visible_replay(request, pk, replay_id)
    names = [r["name"] for r in replay.rewards]

    def chunks():
        lines = []
        for row in replay.rows.order_by("step", "index").values().iterator(chunk_size=2000):
            row.pop("id"), row.pop("replay_id")
            row["old_rewards"] = dict(zip(names, row["old_rewards"]))
            row["new_rewards"] = dict(zip(names, row["new_rewards"]))
            lines.append(json.dumps({"run": run.pk, "replay": replay.pk, **row}))
            if len(lines) >= 2000:
                yield ("\n".join(lines) + "\n").encode()
                lines = []
        if lines:
            yield ("\n".join(lines) + "\n").encode()

    response = StreamingHttpResponse(async_chunks(chunks()), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-replay-{replay.pk}.jsonl"'
    return response


@require_GET
def search(request):
    """Search across the runs the user may see (runs.rollouts.search)."""
    form = SearchForm(request.GET or None)
    page, problem, next_query = None, "", ""
    if request.GET and form.is_valid():
        data = form.cleaned_data
        try:
            page = search_runs(request.user, data["q"], where=data["where"] or "both", after=data["after"])
        except SearchTooSlow as exc:
            problem = str(exc)
        if page and page.next_cursor:
            params = request.GET.copy()
            params["after"] = page.next_cursor
            next_query = params.urlencode()
    status = 400 if request.GET and form.errors else 422 if problem else 200
    return render(
        request,
        "rollouts/search.html",
        {"form": form, "page": page, "problem": problem, "next_query": next_query},
        status=status,
    )


@require_GET
def rollout_link(request, pk, rollout_id):
    """A rollout's stable address: the run page at its step, its group in view and the completion marked. 404 to
    whoever may not read the run."""
    run = visible_run(request, pk)
    row = Rollout.objects.filter(run=run, id=rollout_id).values("step", "group", "index").first()
    if row is None:
        raise Http404("no such rollout in this run")
    query = urlencode({"step": row["step"], "completion": row["index"]})
    return redirect(f"{reverse('run_detail', args=[run.pk])}?{query}#group-{row['group']}")


@require_GET
def group_link(request, pk, step, group):
    """A group's stable address: the run page at its step, the group in view. 404 to whoever may not read the run."""
    run = visible_run(request, pk)
    if not Rollout.objects.filter(run=run, step=step, group=group).exists():
        raise Http404("no such group at this step")
    return redirect(f"{reverse('run_detail', args=[run.pk])}?{urlencode({'step': step})}#group-{group}")
