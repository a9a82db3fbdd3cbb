"""The page that imports a run trained elsewhere from its trainer's files (runs.attach.importing), and the run
page's Stop watching button."""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from runs.access import writable_run
from runs.attach.importing import ImportRefused, run_import, run_import_stop


def run_import_files(request):
    errors: list[str] = []
    values = {
        "source": "auto",
        "path": "",
        "validation_path": "",
        "name": "",
        "model": "",
        "watch": False,
        "num_generations": "",
        "run": "",
    }
    if request.method == "POST":
        values = {
            "source": request.POST.get("source", "auto"),
            "path": request.POST.get("path", "").strip(),
            "validation_path": request.POST.get("validation_path", "").strip(),
            "name": request.POST.get("name", "").strip(),
            "model": request.POST.get("model", "").strip(),
            "watch": bool(request.POST.get("watch")),
            "num_generations": request.POST.get("num_generations", "").strip(),
            "run": request.POST.get("run", "").strip(),
        }
        options = {}
        if values["num_generations"]:
            if not values["num_generations"].isdigit():
                errors.append("num_generations: a whole number from 1")
            else:
                options["num_generations"] = int(values["num_generations"])
        if values["run"]:
            options["run"] = values["run"]
        if values["source"] == "verl" and request.POST.get("no_std"):
            options["norm_adv_by_std_in_grpo"] = False
        uploads = request.FILES.getlist("files")
        if not errors:
            try:
                run = run_import(
                    owner=request.user,
                    source=values["source"],
                    path=values["path"] if not uploads else "",
                    uploads=uploads or None,
                    name=values["name"],
                    model=values["model"],
                    options=options,
                    watch=values["watch"],
                    validation_path=values["validation_path"],
                )
                return redirect(run.get_absolute_url())
            except ImportRefused as exc:
                errors.append(str(exc))
    return render(
        request,
        "attach/import_files.html",
        {"errors": errors, "values": values, "roots": settings.GRPO_IMPORT_ROOTS},
        status=400 if errors else 200,
    )


@require_POST
def run_import_stop_view(request, pk):
    run = writable_run(request, pk)
    run_import_stop(run=run)
    return redirect(run.get_absolute_url())
