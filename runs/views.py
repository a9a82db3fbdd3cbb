from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET

from rewards.models import RewardFunction
from runs import selectors
from runs.datasets import DatasetError
from runs.forms import DatasetHubForm, DatasetMappingForm, DatasetUploadForm, EvaluationForm, RunForm
from runs.live import sse_response
from runs.models import Dataset, DatasetVersion, Run
from runs.groups import formula
from runs.services import dataset_import, dataset_import_hf, dataset_version_map, hf_import_root
from runs.telemetry import telemetry_series


def dashboard(request):
    return render(request, "runs/dashboard.html", {
        "datasets": Dataset.objects.filter(owner=request.user).prefetch_related("versions"),
        "reward_functions": RewardFunction.objects.filter(owner=request.user),
        "runs": Run.objects.filter(owner=request.user).select_related("dataset_version__dataset"),
    })


class _UploadLimit(FileUploadHandler):
    """Stops reading an upload once it passes GRPO_MAX_UPLOAD_BYTES, before it is all on disk."""

    def receive_data_chunk(self, raw_data, start):
        if start + len(raw_data) > settings.GRPO_MAX_UPLOAD_BYTES:
            self.request.upload_too_large = True
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size):
        return None


@csrf_exempt  # checked below, once the size limit is in place (handlers must be set before the body is read)
def dataset_upload(request, pk=None):
    request.upload_handlers.insert(0, _UploadLimit(request))
    return _dataset_upload(request, pk)


@csrf_protect
def _dataset_upload(request, pk):
    dataset = get_object_or_404(Dataset, pk=pk, owner=request.user) if pk else None
    source = request.POST.get("source", "file") if request.method == "POST" else None  # one page, two forms
    forms = {"file": DatasetUploadForm(request.POST if source == "file" else None,
                                       request.FILES if source == "file" else None, dataset=dataset),
             "hf": DatasetHubForm(request.POST if source == "hf" else None, dataset=dataset, prefix="hf")}
    form = forms.get(source)
    errors = []
    if getattr(request, "upload_too_large", False):
        errors = [f"the file is larger than the upload limit ({settings.GRPO_MAX_UPLOAD_BYTES} bytes)"]
    elif form is not None and form.is_valid():
        try:
            version = _import(source, form.cleaned_data, owner=request.user, dataset=dataset)
        except DatasetError as exc:
            errors = exc.errors
        else:
            messages.success(request, f"Imported {version.row_count} rows as version {version.number}.")
            return redirect(version)
    return render(request, "runs/dataset_upload.html", {
        "upload_form": forms["file"], "hub_form": forms["hf"], "errors": errors, "dataset": dataset,
        "imports_root": hf_import_root(),
    }, status=400 if errors or (form is not None and form.errors) else 200)


def _import(source: str, data: dict, *, owner, dataset) -> DatasetVersion:
    common = dict(owner=owner, name=data.get("name", ""), dataset=dataset, prompt_column=data["prompt_column"],
                  gsm8k_column=data["gsm8k_column"].strip())
    if source == "file":
        return dataset_import(stream=data["file"], source_name=data["file"].name, **common)
    return dataset_import_hf(local_path=data["local_path"], hub_id=data["hub_id"], config=data["config"],
                             split=data["split"], **common)


def _owned_version(request, pk, number=None) -> DatasetVersion:
    dataset = get_object_or_404(Dataset, pk=pk, owner=request.user)
    versions = dataset.versions.select_related("dataset")
    version = versions.filter(number=number).first() if number else versions.first()
    if version is None:
        raise Http404
    return version


def dataset_detail(request, pk, number=None):
    version = _owned_version(request, pk, number)
    q = request.GET.get("q", "").strip()[:200]
    try:
        page = int(request.GET.get("page", 1))
    except ValueError:
        page = 1
    rows = selectors.dataset_rows(version, q=q, page=page)
    versions = selectors.dataset_versions(version.dataset)
    base = request.path + "?" + (urlencode({"q": q}) + "&" if q else "")
    return render(request, "runs/dataset_detail.html", {
        "dataset": version.dataset, "version": version, "versions": versions, "latest": versions[0].pk == version.pk,
        "rows": rows, "q": q, "page_url": base + "page=",
    })


def dataset_mapping(request, pk, number):
    version = _owned_version(request, pk, number)
    action = request.POST.get("action") if request.method == "POST" else None
    form = DatasetMappingForm(request.POST or None, version=version, initial=DatasetMappingForm.initial_for(version))
    errors, preview = [], None
    if action is None:
        mapping, model = version.mapping, ""
    elif form.is_valid():
        mapping, model = form.mapping(), form.cleaned_data["model"].strip()
        if action == "save":
            try:
                new = dataset_version_map(version=version, mapping=mapping)
            except DatasetError as exc:
                errors = exc.errors
            else:
                messages.success(request, f"Saved the mapping as version {new.number}.")
                return redirect(new)
    else:
        mapping = None
    if mapping is not None and not errors:
        try:
            preview = selectors.dataset_preview(version, mapping, model=model)
        except DatasetError as exc:
            errors = exc.errors
    return render(request, "runs/dataset_mapping.html", {
        "dataset": version.dataset, "version": version, "form": form, "errors": errors, "preview": preview,
    }, status=400 if errors or form.errors else 200)


def run_new(request):
    initial = {"name": "demo run", "dataset_version": request.GET.get("dataset_version")}
    form = RunForm(request.POST or None, owner=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        from runs.lifecycle_views import create_from_form

        run = create_from_form(request, form)
        if run:
            return redirect(run)
    return render(request, "runs/run_new.html", {"form": form}, status=400 if form.errors else 200)


def run_detail(request, pk, eval_form=None):
    """The run page; ``eval_form``: the evaluation form as submitted, with its errors (runs.evaluation_views)."""
    run = get_object_or_404(Run.objects.select_related("dataset_version__dataset"), pk=pk, owner=request.user)
    return render(request, "runs/run_detail.html", {
        "run": run, "formula": formula((run.config or {}).get("scale_rewards")),
        "eval_form": eval_form or EvaluationForm(run=run),
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
def run_telemetry_json(request, pk):
    return JsonResponse(telemetry_series(_owned_run(request, pk)))


@require_GET
def run_step_json(request, pk, step):
    """A page of the step's groups: ``?from=<first group>&groups=<how many>`` (32 by default, 256 at most)."""
    run = _owned_run(request, pk)
    try:
        first = max(0, int(request.GET.get("from", 0)))
        count = min(256, max(1, int(request.GET.get("groups", selectors.STEP_GROUPS_PAGE))))
    except ValueError:
        return JsonResponse({"errors": {"from": ["give whole numbers for from and groups"]}}, status=400)
    return JsonResponse({"step": step, "reward_names": run.reward_names, "scale_rewards": run.config.get("scale_rewards"),
                         **selectors.step_view(run, step, first_group=first, groups=count)})


async def run_events(request, pk):
    """Server-sent events: one message per ingested batch of steps, fed by Redis pub/sub."""
    user = await request.auser()
    if not await Run.objects.filter(pk=pk, owner=user).aexists():
        raise Http404
    return sse_response([pk])
