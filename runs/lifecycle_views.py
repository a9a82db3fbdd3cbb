"""Pages and endpoints of a run's life: progress, cancel, resume, retry, clone, config diff, YAML, workers."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from runs.config_diff import config_diff
from runs.forms import RunForm
from runs.models import Run
from runs.services import RunRefused, run_cancel, run_create, run_reap_stale, run_resume, run_retry
from runs.trl_yaml import parse_run_yaml, run_yaml
from workers.models import Worker
from workers.supervisor import log_tail


def _owned_run(request, pk) -> Run:
    return get_object_or_404(Run, pk=pk, owner=request.user)


def _speed(run: Run) -> tuple[float | None, float | None]:
    """Steps per second over the last steps of this attempt, and the seconds left at that pace."""
    times = list(run.step_metrics.exclude(logged_at=None).order_by("-step").values_list("step", "logged_at")[:20])
    if len(times) < 2:
        return None, None
    (last_step, last_at), (first_step, first_at) = times[0], times[-1]
    seconds = (last_at - first_at).total_seconds()
    if seconds <= 0:
        return None, None
    rate = (last_step - first_step) / seconds
    left = max(0, run.total_steps - run.step) / rate if rate > 0 and not run.is_finished else None
    return rate, left


@require_GET
def run_progress_json(request, pk):
    run = _owned_run(request, pk)
    if run.status == Run.Status.RUNNING:
        run_reap_stale()  # a run looked at whose worker died is settled now, not at the next heartbeat
        run.refresh_from_db()
    rate, left = _speed(run)
    return JsonResponse({
        "status": run.status, "step": run.step, "total_steps": run.total_steps, "progress": run.progress,
        "steps_per_second": rate, "eta_seconds": left, "attempt": run.attempt, "checkpoint_step": run.checkpoint_step,
        "resumable": run.resumable, "cancel_requested": run.cancel_requested_at is not None,
        "worker": run.worker_name, "log_tail": log_tail(run.run_dir / "train.log", 30), "error": run.error,
    })


@require_POST
def run_cancel_view(request, pk):
    run = run_cancel(run=_owned_run(request, pk))
    messages.info(request, "Cancelled." if run.status == Run.Status.CANCELLED else "Cancelling: training stops "
                                                                                   "within seconds.")
    return redirect(run)


@require_POST
def run_resume_view(request, pk):
    run = _owned_run(request, pk)
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
        run = run_retry(run=_owned_run(request, pk))
    except RunRefused as exc:
        messages.error(request, "; ".join(exc.errors))
        return redirect("run_detail", pk=pk)
    return redirect(run)


def create_from_form(request, form, parent=None):
    data = form.cleaned_data
    try:
        return run_create(owner=request.user, name=data["name"], model=data["model"],
                          dataset_version=data["dataset_version"], rewards=data["rewards"], config=data["config"],
                          config_extra=data.get("config_extra") or {}, requested_gpus=data["requested_gpus"],
                          evaluation=data["evaluation"], parent=parent)
    except RunRefused as exc:
        for error in exc.errors:
            form.add_error(None, error)
        return None


def run_clone(request, pk):
    """The run form filled from a run: edit what you want and start it; the clone remembers its parent."""
    parent = _owned_run(request, pk)
    form = RunForm(request.POST or None, owner=request.user, run=parent)
    if request.method == "POST" and form.is_valid():
        run = create_from_form(request, form, parent=parent)
        if run:
            return redirect("run_diff", pk=parent.pk, other=run.pk)
    return render(request, "runs/run_new.html", {"form": form, "parent": parent}, status=400 if form.errors else 200)


def run_import(request):
    """A TRL config YAML fills the run form; nothing runs until the form is submitted."""
    text = request.POST.get("yaml", "")
    if request.FILES.get("file"):
        text = request.FILES["file"].read(1024 * 1024).decode("utf-8", errors="replace")
    imported = parse_run_yaml(text, owner=request.user)
    form = RunForm(owner=request.user, imported=imported)
    return render(request, "runs/run_new.html", {"form": form, "import_errors": imported.errors,
                                                  "import_notes": imported.notes},
                  status=400 if imported.errors else 200)


@require_GET
def run_yaml_view(request, pk):
    run = _owned_run(request, pk)
    response = HttpResponse(run_yaml(run), content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.yaml"'
    return response


def run_diff(request, pk, other):
    a, b = _owned_run(request, pk), _owned_run(request, other)
    return render(request, "runs/run_diff.html", {"a": a, "b": b, "rows": config_diff(a, b)})


def workers_list(request):
    fresh = timezone.now() - timedelta(minutes=2)
    workers = list(Worker.objects.all())
    busy = dict(Run.objects.filter(status=Run.Status.RUNNING).values_list("worker_name", "name"))
    return render(request, "runs/workers.html", {
        "workers": [{"w": w, "online": w.last_seen >= fresh, "running": busy.get(w.name)} for w in workers]})
