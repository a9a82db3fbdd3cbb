"""Pages of the datasets capability: upload (with the size limit enforced while the body streams in), a version's
rows and preview, the mapping page. Every URL answers 404 unless the user owns the dataset."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET

from grpo_web.sharing import share_context
from runs.access import visible_version, visible_versions
from runs.datasets import selectors
from runs.datasets.forms import DatasetHubForm, DatasetMappingForm, DatasetUploadForm
from runs.datasets.importing import DatasetError
from runs.datasets.mapping import Mapping
from runs.datasets.services import dataset_import, dataset_import_hf_start, dataset_version_map, import_folders
from runs.models import Dataset, DatasetImport, DatasetVersion


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
    # a new version changes the dataset: its owner, or a team that shares it for writing
    dataset = get_object_or_404(Dataset.objects.visible_to(request.user, write=True), pk=pk) if pk else None
    source = request.POST.get("source", "file") if request.method == "POST" else None  # one page, two forms
    folders = import_folders()  # before the hub form lists what they hold
    forms = {
        "file": DatasetUploadForm(
            request.POST if source == "file" else None, request.FILES if source == "file" else None, dataset=dataset
        ),
        "hf": DatasetHubForm(request.POST if source == "hf" else None, dataset=dataset, prefix="hf"),
    }
    form = forms.get(source)
    errors = []
    if getattr(request, "upload_too_large", False):
        errors = [f"the file is larger than the upload limit ({settings.GRPO_MAX_UPLOAD_BYTES} bytes)"]
    elif form is not None and form.is_valid():
        data = form.cleaned_data
        common = dict(
            owner=request.user,
            name=data.get("name", ""),
            dataset=dataset,
            prompt_column=data["prompt_column"],
            gsm8k_column=data["gsm8k_column"].strip(),
        )
        try:
            if source == "file":
                version = dataset_import(stream=data["file"], source_name=data["file"].name, **common)
            else:
                job = dataset_import_hf_start(
                    local_path=data["local_path"],
                    hub_id=data["hub_id"],
                    config=data["config"],
                    split=data["split"],
                    **common,
                )
        except DatasetError as exc:
            errors = exc.errors
        else:
            if source != "file":
                return redirect(job)
            messages.success(request, f"Imported {version.row_count} rows as version {version.number}.")
            return redirect(version)
    return render(
        request,
        "datasets/dataset_upload.html",
        {
            "upload_form": forms["file"],
            "hub_form": forms["hf"],
            "errors": errors,
            "dataset": dataset,
            "import_folders": folders,
        },
        status=400 if errors or (form is not None and form.errors) else 200,
    )


def _owned_import(request, pk) -> DatasetImport:
    return get_object_or_404(DatasetImport.objects.select_related("version__dataset"), pk=pk, owner=request.user)


def dataset_import_detail(request, pk):
    """A background import: its progress, then its version (the page moves there) or its errors."""
    return render(request, "datasets/dataset_import.html", {"job": _owned_import(request, pk)})


@require_GET
def dataset_import_json(request, pk):
    job = _owned_import(request, pk)
    return JsonResponse(
        {
            "status": job.status,
            "progress": job.progress,
            "rows_done": job.rows_done,
            "errors": job.errors,
            "finished": job.is_finished,
            "version_url": job.version.get_absolute_url() if job.version else None,
        }
    )


def _visible_version(request, pk, number=None, *, write: bool = False) -> DatasetVersion:
    if not write:  # readers include a team that may read a run trained on it (runs.access.visible_versions)
        return visible_version(request, pk, number)
    dataset = get_object_or_404(Dataset.objects.visible_to(request.user, write=write), pk=pk)
    versions = dataset.versions.select_related("dataset")
    version = versions.filter(number=number).first() if number else versions.first()
    if version is None:
        raise Http404
    return version


def dataset_detail(request, pk, number=None):
    version = _visible_version(request, pk, number)
    q = request.GET.get("q", "").strip()[:200]
    try:
        page = int(request.GET.get("page", 1))
    except ValueError:
        page = 1
    rows = selectors.dataset_rows(version, q=q, page=page)
    readable = set(visible_versions(request.user).filter(dataset=version.dataset).values_list("pk", flat=True))
    versions = [v for v in selectors.dataset_versions(version.dataset) if v.pk in readable]
    base = request.path + "?" + (urlencode({"q": q}) + "&" if q else "")
    return render(
        request,
        "datasets/dataset_detail.html",
        {
            "dataset": version.dataset,
            "version": version,
            "versions": versions,
            "latest": versions[0].pk == version.pk,
            "rows": rows,
            "q": q,
            "page_url": base + "page=",
            "share_url": reverse("dataset_share", args=[version.dataset.pk]),
            **share_context(version.dataset, request.user),
        },
    )


def dataset_mapping(request, pk, number):
    # a saved mapping is a new version of the dataset
    version = _visible_version(request, pk, number, write=request.method == "POST")
    action = request.POST.get("action") if request.method == "POST" else None
    form = DatasetMappingForm(request.POST or None, version=version, initial=DatasetMappingForm.initial_for(version))
    errors, preview = [], None
    if action is None:
        mapping, model = Mapping.of(version), ""
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
            preview = selectors.dataset_preview(version, mapping, model=model, user=request.user)
        except DatasetError as exc:
            errors = exc.errors
    return render(
        request,
        "datasets/dataset_mapping.html",
        {
            "dataset": version.dataset,
            "version": version,
            "form": form,
            "errors": errors,
            "preview": preview,
        },
        status=400 if errors or form.errors else 200,
    )
