"""Pages and endpoints of a run's life: the dashboard, a new run (form or YAML import), the run page and its JSON and
event stream, progress, cancel, resume, retry, clone, config diff, YAML, a standalone evaluation started from the
run page."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from grpo_web.sharing import share_context
from rewards.models import RewardFunction
from runs.access import visible_run, writable_run
from runs.attach.importing import import_record
from runs.evaluations.forms import EvaluationForm
from runs.evaluations.services import EvaluationRefused, evaluation_create
from runs.lifecycle.config_diff import config_diff
from runs.lifecycle.demos import DEMO_GRPO, DEMO_RUNS, DEMO_SFT
from runs.lifecycle.forms import RunForm
from runs.lifecycle.provenance import provenance_fields, script_source
from runs.lifecycle.selectors import (
    SORTS,
    config_rows,
    dashboard_runs,
    log_view,
    run_liveness,
    run_pace,
    run_silence,
)
from runs.lifecycle.services import (
    RunRefused,
    run_annotate,
    run_cancel,
    run_create,
    run_resume,
    run_retry,
    split_tags,
)
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.trl_yaml import ImportedRun, parse_run_yaml, run_yaml
from runs.live import sse_response
from runs.models import Dataset, Rollout, Run
from runs.paths import log_tail
from runs.rollouts import selectors
from runs.rollouts.groups import eps_text
from runs.rollouts.reflection import matcher
from runs.safe_yaml import MAX_BYTES, too_large
from runs.series import DEFAULT_BUCKETS, MAX_BUCKETS


def dashboard(request):
    # a NUL cannot even be compared with in PostgreSQL: search without it
    params = {
        name: request.GET.get(name, "")[:200].replace("\x00", "")
        for name in ("q", "status", "dataset", "model", "scope", "team", "sort")
    }
    params["sort"] = params["sort"] or "-created"
    table = dashboard_runs(request.user, **params)
    query = {k: v for k, v in params.items() if v and k != "sort"}
    return render(
        request,
        "lifecycle/dashboard.html",
        {
            "datasets": Dataset.objects.visible_to(request.user).select_related("owner").prefetch_related("versions"),
            "reward_functions": RewardFunction.objects.visible_to(request.user).select_related("owner"),
            "table": table,
            "params": params,
            "filtered": bool(query),
            "sort_links": {
                key: "?" + urlencode({**query, "sort": key if params["sort"] == f"-{key}" else f"-{key}"})
                for key in SORTS
            },
        },
    )


def run_new(request):
    """The run form; ``?kind=sft``: an SFT run (TRL's SFTTrainer, SFTConfig's fields)."""
    kind = "sft" if request.GET.get("kind") == "sft" else "grpo"
    initial = {
        "name": "demo SFT run" if kind == "sft" else "demo run",
        "dataset_version": request.GET.get("dataset_version"),
        # the demo's small values on the tiny model; a field the form leaves at its default is TRL's
        **(DEMO_SFT if kind == "sft" else DEMO_GRPO),
    }
    if request.GET.get("model"):  # "use as base" on the Models page
        initial["model"] = request.GET["model"][:500]
    demo = DEMO_RUNS.get(request.GET.get("demo", "")) if request.method == "GET" and kind == "grpo" else None
    imported = parse_run_yaml(demo.yaml, owner=request.user) if demo else None
    form = RunForm(request.POST or None, owner=request.user, initial=initial, kind=kind, imported=imported)
    if request.method == "POST" and form.is_valid():
        run = create_from_form(request, form)
        if run:
            return redirect(run)
    return render(
        request,
        "lifecycle/run_new.html",
        {
            "form": form,
            "import_notes": carried_notes(request),
            # a demo template on an install without the demo's data: what is missing (load_demo makes it)
            "import_errors": imported.errors if imported else [],
            "demo_runs": DEMO_RUNS,
        },
        status=400 if form.errors else 200,
    )


def carried_notes(request) -> list[str]:
    """The notes of an imported config, carried through the form's re-renders (hidden fields): a refusal must not
    hide what the import changed. Shown as text only."""
    return [note[:2000] for note in request.POST.getlist("import_note")[:500]] if request.method == "POST" else []


# the run page's tabs, in order: (the name in the address, #metrics; the label)
RUN_TABS = [
    ("overview", "Overview"),
    ("metrics", "Metrics"),
    ("rollouts", "Rollouts"),
    ("evaluations", "Evaluations"),
    ("resources", "Resources"),
    ("config", "Config"),
    ("log", "Log"),
]


# what grpo-web sets on TRL's config for every run (workers.training.trainargs), shown on the Config tab
SET_FOR_EVERY_RUN = [
    ("output_dir", "the run's folder on its worker"),
    ("logging_steps", "1: every step's metrics reach the run page"),
    ("report_to", "none: the run page draws the metrics"),
    ("save_strategy", "steps, every save_steps (none when save_steps is 0)"),
    ("use_cpu", "on a worker without a GPU"),
    ("disable_tqdm", "true"),
    ("dataloader_num_workers", "0: rows are read in the training process"),
]


def run_detail(request, pk, eval_form=None, notes_form=None):
    """The run page; ``eval_form``: the evaluation form as submitted, with its errors (run_evaluate); ``notes_form``:
    the tags and notes as submitted, with their errors (run_notes)."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("dataset_version__dataset"), pk=pk)
    return render(
        request,
        "lifecycle/run_detail.html",
        {
            "run": run,
            "can_write": Run.objects.visible_to(request.user, write=True).filter(pk=run.pk).exists(),
            "notes_form": notes_form or {"tags": run.tags, "notes": run.notes, "errors": []},
            "formula": selectors.run_formula(run),
            "eval_form": eval_form or EvaluationForm(run=run),
            "config_rows": config_rows(run),
            "set_by_grpo_web": SET_FOR_EVERY_RUN,
            "provenance": provenance_fields(run.provenance),
            "script_source": script_source(run.provenance),
            # an SFT run has no rollouts: no Rollouts tab
            "tabs": [t for t in RUN_TABS if not (run.is_sft and t[0] == "rollouts")],
            "share_url": reverse("run_share", args=[run.pk]),
            "import_record": import_record(run) if run.origin == Run.Origin.IMPORTED else None,
            **share_context(run, request.user),
        },
    )


@require_POST
def run_notes(request, pk):
    """Save the run's tags (comma separated) and notes; bad input re-renders the run page with each error by name and
    what was typed, and saves nothing."""
    run = writable_run(request, pk)
    tags, notes = request.POST.get("tags", ""), request.POST.get("notes", "")
    try:
        run_annotate(run=run, tags=split_tags(tags), notes=notes)
    except RunRefused as exc:
        response = run_detail(request, pk, notes_form={"tags": tags, "notes": notes, "errors": exc.errors})
        response.status_code = 400
        return response
    messages.success(request, "Saved the tags and notes.")
    return redirect(run)


@require_POST
def run_pin_view(request, pk):
    """Pin a metric's curve to the Overview (``metric``; empty unpins), from the Metrics tab's pin buttons."""
    run = writable_run(request, pk)
    try:
        run = run_annotate(run=run, pinned_metric=request.POST.get("metric", ""))
    except RunRefused as exc:
        return JsonResponse({"errors": {"metric": exc.errors}}, status=400)
    return JsonResponse({"pinned_metric": run.pinned_metric})


@require_GET
def run_status_json(request, pk):
    run = visible_run(request, pk)
    return JsonResponse(
        {
            "status": run.status,
            "step": run.step,
            "total_steps": run.total_steps,
            "progress": run.progress,
            "error": run.error,
            "finished": run.is_finished,
            "steps": selectors.rollout_steps(run),
        }
    )


def _smooth(request) -> float | None:
    """``?smooth=``: TensorBoard's smoothing weight, from 0 up to, not including, 1; None when it is not one."""
    try:
        smooth = float(request.GET.get("smooth") or 0)
    except ValueError:
        return None
    return smooth if 0 <= smooth < 1 else None  # NaN fails this too


SMOOTH_ERROR = {"smooth": ["give a weight from 0 up to, not including, 1"]}


@require_GET
def run_metrics_json(request, pk):
    """What the run page's charts are (selectors.metric_catalog): no series, each chart fetches its own
    (run_series_json)."""
    run = visible_run(request, pk)
    if _smooth(request) is None:
        return JsonResponse({"errors": SMOOTH_ERROR}, status=400)
    return JsonResponse(selectors.metric_catalog(run))


@require_GET
def run_series_json(request, pk):
    """One metric bucketed on the server: ``?metric=reward&from=1&to=100000&buckets=1000&smooth=0.6``; from and to
    default to the run's first and last step, buckets to 1,000 (2,000 at most). Min, max and last value per bucket;
    a range no wider than the bucket count comes back a point a step ("exact")."""
    run = visible_run(request, pk)
    metric = request.GET.get("metric", "")
    if not metric or len(metric) > 200:
        return JsonResponse({"errors": {"metric": ["name one logged metric (at most 200 characters)"]}}, status=400)
    bounds = {}
    for name in ("from", "to", "buckets"):
        raw = request.GET.get(name, "")
        try:
            bounds[name] = int(raw) if raw else None
        except ValueError:
            return JsonResponse({"errors": {name: [f"give a whole number, not {raw[:40]!r}"]}}, status=400)
        if bounds[name] is not None and not 0 <= bounds[name] < 2**31:
            return JsonResponse({"errors": {name: ["give a whole number from 0 to 2147483647"]}}, status=400)
    buckets = DEFAULT_BUCKETS if bounds["buckets"] is None else bounds["buckets"]
    if not 1 <= buckets <= MAX_BUCKETS:
        return JsonResponse({"errors": {"buckets": [f"give 1 to {MAX_BUCKETS} buckets"]}}, status=400)
    smooth = _smooth(request)
    if smooth is None:
        return JsonResponse({"errors": SMOOTH_ERROR}, status=400)
    series = selectors.metric_buckets(
        run, metric, first=bounds["from"], last=bounds["to"], buckets=buckets, smooth=smooth
    )
    return JsonResponse(series)


@require_GET
def run_step_completion_json(request, pk, step, index):
    """One completion of the step in full (a page shows a long one as its preview): its text, reflection spans and
    tool turns."""
    run = visible_run(request, pk)
    stored = selectors.batch_step(run, step)
    row = Rollout.objects.filter(run=run, step=stored, index=index).values("index", "completion", "messages").first()
    if row is None:
        raise Http404("no such completion at this step")
    spans = matcher(tuple(run.reflection_phrases)).spans(row["completion"])
    return JsonResponse({**row, "step": stored, "spans": spans})


@require_GET
def run_step_json(request, pk, step):
    """A page of the step's groups: ``?from=<first group>&groups=<how many>`` (32 by default, 256 at most)."""
    run = visible_run(request, pk)
    try:
        first = max(0, int(request.GET.get("from", 0)))
        count = min(256, max(1, int(request.GET.get("groups", selectors.STEP_GROUPS_PAGE))))
    except ValueError:
        return JsonResponse({"errors": {"from": ["give whole numbers for from and groups"]}}, status=400)
    view = selectors.step_view(run, step, first_group=first, groups=count, previews=True)
    # a batch trained on again at this step is stored at the step it was generated for (view["batch_step"])
    replayed = selectors.replay_values(run, request.GET.get("replay", ""), step=view["batch_step"] or step)
    if replayed is not None:  # a reward replay beside what TRL stored
        by_index = {r["index"]: r for r in replayed}
        for group in view["groups"]:
            for c in group["completions"]:
                c["replay"] = by_index.get(c["index"])
    return JsonResponse(
        {
            "step": step,
            "reward_names": run.reward_names,
            "scale_rewards": run.config.get("scale_rewards"),
            "aggregation": run.config.get("multi_objective_aggregation", "sum_then_normalize"),
            "advantages_by": run.advantages_by,
            "epsilon": eps_text(run.advantage_epsilon),
            "lengths_known": run.lengths_known,
            "replay": replayed is not None,
            **view,
        }
    )


async def run_events(request, pk):
    """Server-sent events: one message per ingested batch of steps, fed by Redis pub/sub."""
    user = await request.auser()
    if not await Run.objects.visible_to(user).filter(pk=pk).aexists():
        raise Http404
    return sse_response([pk])


LOG_STEP_ROWS = 50  # the latest logged steps searched for the steps of the log tail's metric lines


@require_GET
def run_progress_json(request, pk):
    run = visible_run(request, pk)  # a read: a run whose worker died is settled by a live worker's beat (its reaper)
    liveness = run_liveness(run)  # first: it reads the run again when its supervisor has just let go
    pace, silence = run_pace(run), run_silence(run)
    tail = log_tail(run.run_dir / "train.log", 30)
    return JsonResponse(
        {
            "status": run.status,
            "step": run.step,
            "total_steps": run.total_steps,
            "progress": run.progress,
            "steps_per_second": pace.steps_per_second,
            "eta_seconds": pace.eta_seconds,
            "stalled_seconds": pace.stalled_seconds,
            "stall_limit_seconds": pace.stall_limit_seconds,
            "silent_seconds": silence.seconds if silence else None,
            "trainer_alive": silence.trainer_alive if silence else None,
            "step_age_seconds": liveness.step_age_seconds,
            "worker_lost": liveness.worker_lost,
            "attempt": run.attempt,
            "checkpoint_step": run.checkpoint_step,
            "resumable": run.resumable,
            "cancel_requested": run.cancel_requested_at is not None,
            "worker": run.worker_name,
            "log_tail": tail,
            "log": log_view(tail, run.step_metrics.order_by("-step").values_list("step", "metrics")[:LOG_STEP_ROWS]),
            "error": run.error,
            "checking_seconds": (timezone.now() - run.created_at).total_seconds()
            if run.status == Run.Status.CHECKING
            else None,
            "check_timeout": settings.GRPO_CONTRACT_CHECK_TIMEOUT,
        }
    )


@require_POST
def run_cancel_view(request, pk):
    """Cancel once confirmed: the run page's button asks first; a POST without ``confirm=yes`` (no JavaScript, a
    script) gets a page that asks."""
    run = writable_run(request, pk)
    if request.POST.get("confirm") != "yes":
        return render(request, "lifecycle/run_cancel_confirm.html", {"run": run})
    run = run_cancel(run=run)
    messages.info(
        request, "Cancelled." if run.status == Run.Status.CANCELLED else "Cancelling: training stops within seconds."
    )
    return redirect(run)


@require_POST
def run_resume_view(request, pk):
    run = writable_run(request, pk)
    try:
        run = run_resume(run=run)
    except RunRefused as exc:
        messages.error(request, "; ".join(exc.errors))
    else:
        messages.info(request, f"Resuming from the checkpoint at step {run.checkpoint_step}.")
    return redirect(run)


@require_POST
def run_retry_view(request, pk):
    try:
        run = run_retry(run=writable_run(request, pk))
    except RunRefused as exc:
        messages.error(request, "; ".join(exc.errors))
        return redirect("run_detail", pk=pk)
    return redirect(run)


def create_from_form(request, form, parent=None):
    data = form.cleaned_data
    try:
        return run_create(
            owner=request.user,
            # the notes of a config imported into the form go with the run, onto its page
            spec=RunSpec.from_form({**data, "import_notes": carried_notes(request)}, parent=parent),
            queue_anyway=data.get("queue_anyway", False),
        )
    except RunRefused as exc:
        for error in exc.errors:
            form.add_error(None, error)
        return None


def run_clone(request, pk):
    """The run form filled from a run: edit what you want and start it; the clone remembers its parent."""
    parent = visible_run(request, pk)
    form = RunForm(request.POST or None, owner=request.user, run=parent)
    if request.method == "POST" and form.is_valid():
        run = create_from_form(request, form, parent=parent)
        if run:
            messages.info(request, f"Started {run.name}; its page links to the diff against {parent.name}.")
            return redirect(run)
    return render(
        request, "lifecycle/run_new.html", {"form": form, "parent": parent}, status=400 if form.errors else 200
    )


def run_import(request):
    """A TRL config YAML fills the run form; nothing runs until the form is submitted. A config over MAX_BYTES is
    refused whole, naming its size and the limit, pasted or uploaded."""
    try:
        upload = request.FILES.get("file")
        text = request.POST.get("yaml", "")
    except RequestDataTooBig:
        return import_too_large(request)
    if upload is not None and upload.size > MAX_BYTES:  # refused before a byte of it is read
        return _import_page(request, ImportedRun(errors=[too_large(upload.size)]))
    if upload is not None:
        text = upload.read().decode("utf-8", errors="replace")
    return _import_page(request, parse_run_yaml(text, owner=request.user))


def import_too_large(request):
    """The import page's answer to a config pasted past the form's own limit (Django's DATA_UPLOAD_MAX_MEMORY_SIZE,
    before the view or its CSRF check can read it): the size is the request's."""
    return _import_page(request, ImportedRun(errors=[too_large(int(request.META.get("CONTENT_LENGTH") or 0))]))


def _import_page(request, imported: ImportedRun):
    form = RunForm(owner=request.user, imported=imported, kind=imported.kind)
    return render(
        request,
        "lifecycle/run_new.html",
        {"form": form, "import_errors": imported.errors, "import_notes": imported.notes},
        status=400 if imported.errors else 200,
    )


@require_GET
def run_yaml_view(request, pk):
    run = visible_run(request, pk)
    response = HttpResponse(run_yaml(run), content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.yaml"'
    return response


def run_diff(request, pk, other):
    a, b = visible_run(request, pk), visible_run(request, other)
    return render(request, "lifecycle/run_diff.html", {"a": a, "b": b, "rows": config_diff(a, b)})


@require_POST
def run_evaluate(request, pk):
    """Queue a standalone evaluation; bad input re-renders the run page with the form and each error by name."""
    run = writable_run(request, pk)
    form = EvaluationForm(request.POST, run=run)
    if form.is_valid():
        try:
            evaluation = evaluation_create(run=run, user=request.user, **form.evaluation_args())
        except EvaluationRefused as exc:
            for error in exc.errors:
                form.add_error(None, error)
        else:
            messages.success(request, f"Queued an evaluation: {evaluation.label}.")
            return redirect(f"{run.get_absolute_url()}#evaluations")
    response = run_detail(request, pk, eval_form=form)
    response.status_code = 400
    return response
