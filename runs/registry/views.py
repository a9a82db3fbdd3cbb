"""The model registry: the list with lineage, a model's download (a zip of its loadable files; a LoRA run's adapter
alone too) and its export."""

from __future__ import annotations

import zipfile
from tempfile import SpooledTemporaryFile

from django.contrib import messages
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from runs.registry.selectors import archive_files, model_entry, registry
from runs.registry.services import model_export


def model_list(request):
    entries = registry(request.user)
    return render(
        request,
        "registry/model_list.html",
        {"made": [e for e in entries if not e.is_base], "bases": [e for e in entries if e.is_base]},
    )


def _entry(request, run_id, key):
    entry = model_entry(request.user, run_id, key)
    if entry is None:
        raise Http404("no such model")
    return entry


def _zip(files, name: str) -> FileResponse:
    """``files`` in a zip named ``name``.zip, under a folder of that name."""
    archive = SpooledTemporaryFile(max_size=64 * 1024 * 1024)
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in files:
            zf.write(path, arcname=f"{name}/{path.name}")
    archive.seek(0)
    return FileResponse(archive, as_attachment=True, filename=f"{name}.zip", content_type="application/zip")


@require_GET
def model_download(request, run_id, key):
    """The model as a zip: safetensors, config, tokenizer (no optimizer state); loadable with from_pretrained once
    unpacked."""
    entry = _entry(request, run_id, key)
    return _zip(archive_files(entry), f"run-{entry.run.pk}-{entry.key}")


@require_GET
def model_adapter_download(request, run_id):
    """A LoRA run's adapter alone as a zip (adapter_config.json, adapter_model.safetensors, tokenizer): loadable onto
    its base model with PEFT; 404 for a run without one."""
    entry = _entry(request, run_id, "final")
    if entry.adapter is None:
        raise Http404("no adapter")
    return _zip(archive_files(entry, adapter=True), f"run-{entry.run.pk}-adapter")


@require_POST
def model_export_view(request, run_id, key):
    entry = _entry(request, run_id, key)
    folder = model_export(entry=entry, user=request.user)
    messages.success(request, f"Exported {entry.label} to {folder}")
    return redirect("models")
