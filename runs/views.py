import json

from django.conf import settings
from django.contrib import messages
from django.http import Http404, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from rewards.models import RewardFunction
from runs import selectors
from runs.datasets import DatasetError
from runs.forms import DatasetUploadForm, RunForm
from runs.live import channel
from runs.models import Dataset, Run
from runs.reflection import pattern_source
from runs.services import dataset_import, run_create

PREVIEW_ROWS = 20


def dashboard(request):
    return render(request, "runs/dashboard.html", {
        "datasets": Dataset.objects.filter(owner=request.user).prefetch_related("versions"),
        "reward_functions": RewardFunction.objects.filter(owner=request.user),
        "runs": Run.objects.filter(owner=request.user).select_related("dataset_version__dataset"),
    })


def dataset_upload(request):
    form = DatasetUploadForm(request.POST or None, request.FILES or None)
    errors = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        if upload.size > settings.GRPO_MAX_UPLOAD_BYTES:
            errors = [f"the file is {upload.size} bytes; the limit is {settings.GRPO_MAX_UPLOAD_BYTES}"]
        else:
            try:
                version = dataset_import(owner=request.user, name=form.cleaned_data["name"], stream=upload,
                                         source_name=upload.name)
            except DatasetError as exc:
                errors = exc.errors
            else:
                messages.success(request, f"Imported {version.row_count} rows.")
                return redirect(version.dataset)
    status = 400 if errors else 200
    return render(request, "runs/dataset_upload.html", {"form": form, "errors": errors}, status=status)


def dataset_detail(request, pk):
    dataset = get_object_or_404(Dataset, pk=pk, owner=request.user)
    version = dataset.latest_version
    rows = []
    if version:
        with open(version.path, encoding="utf-8") as fh:
            for _, line in zip(range(PREVIEW_ROWS), fh):
                row = json.loads(line)
                rows.append([_cell(row.get(c)) for c in version.columns])
    return render(request, "runs/dataset_detail.html", {"dataset": dataset, "version": version, "rows": rows})


def _cell(value):
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def run_new(request):
    initial = {"name": "demo run", "dataset_version": request.GET.get("dataset_version")}
    form = RunForm(request.POST or None, owner=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = run_create(owner=request.user, name=data["name"], model=data["model"],
                             dataset_version=data["dataset_version"], rewards=data["rewards"], config=data["config"])
        except DatasetError as exc:
            for error in exc.errors:
                form.add_error(None, error)
        else:
            return redirect(run)
    return render(request, "runs/run_new.html", {"form": form}, status=400 if form.errors else 200)


def run_detail(request, pk):
    run = get_object_or_404(Run.objects.select_related("dataset_version__dataset"), pk=pk, owner=request.user)
    return render(request, "runs/run_detail.html", {
        "run": run, "summary": selectors.run_summary(run), "reflection_pattern": pattern_source(),
    })


def _owned_run(request, pk) -> Run:
    return get_object_or_404(Run, pk=pk, owner=request.user)


@require_GET
def run_status_json(request, pk):
    run = _owned_run(request, pk)
    return JsonResponse({"status": run.status, "step": run.step, "total_steps": run.total_steps,
                         "progress": run.progress, "error": run.error, "finished": run.is_finished,
                         "steps": selectors.rollout_steps(run)})


@require_GET
def run_metrics_json(request, pk):
    return JsonResponse(selectors.metric_series(_owned_run(request, pk)))


@require_GET
def run_step_json(request, pk, step):
    run = _owned_run(request, pk)
    return JsonResponse({"step": step, "reward_names": run.reward_names, "scale_rewards": run.config.get("scale_rewards"),
                         "groups": selectors.step_groups(run, step)})


async def run_events(request, pk):
    """Server-sent events: one message per ingested batch of steps, fed by Redis pub/sub."""
    import redis.asyncio as aioredis

    user = await request.auser()
    if not await Run.objects.filter(pk=pk, owner=user).aexists():
        raise Http404

    async def stream():
        client = aioredis.Redis.from_url(settings.REDIS_URL)
        pubsub = client.pubsub()
        await pubsub.subscribe(channel(pk))
        try:
            # the page refetches on "open", so anything published before the subscription is not lost
            yield "retry: 2000\nevent: open\ndata: {}\n\n"
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=15.0)
                if message is None:
                    yield ": keep-alive\n\n"
                else:
                    yield f"data: {message['data'].decode()}\n\n"
        finally:
            await pubsub.aclose()
            await client.aclose()

    response = StreamingHttpResponse(stream(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
