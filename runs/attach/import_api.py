"""The JSON API for importing a run trained elsewhere from its trainer's files (runs.attach.importing): from a
server path under GRPO_IMPORT_ROOTS (optionally watched while the run writes it) or uploaded files; grpo_web/api.py
mounts this router at /api/."""

from __future__ import annotations

from ninja import File, Form, Router, Schema, Status
from ninja.files import UploadedFile
from pydantic import Field

from runs.access import visible_run, writable_run
from runs.apischemas import Errors
from runs.attach.importing import ImportRefused, completeness, import_record, run_import, run_import_stop
from runs.models import Run, RunImport

router = Router()


class ImportIn(Schema):
    path: str = Field(
        description="A TRL output_dir, its completions folder or one table; a verl rollout_data_dir, a folder "
        "holding it and its validation_data_dir, a validation_data_dir alone (a run of its evaluations), or one dump: "
        "absolute, or relative to the first import folder (GRPO_IMPORT_ROOTS)."
    )
    validation_path: str = Field(
        "",
        description="verl's validation_data_dir, when path is not a folder holding it: its {step}.jsonl dumps "
        "become the run's periodic evaluations at their steps.",
    )
    source: str = Field("auto", description="trl, verl, or auto (from the files)")
    name: str = ""
    model: str = Field("", description="The model the run trained, as you name it (the files do not say).")
    watch: bool = Field(False, description="Follow the folder while the run writes it: the run stays running.")
    options: dict = Field(
        default_factory=dict,
        description="reward_names (the columns or keys that are reward functions), reward_weights (TRL's), "
        "num_generations (TRL's, else inferred), norm_adv_by_std_in_grpo (verl's, default true), metrics_file "
        "(verl's file logger), validation_path (as the field).",
    )


class ImportOut(Schema):
    id: int
    name: str
    status: str
    imported: bool = Field(description="False: the app trained this run (no files were imported; the rest is empty).")
    source: str = Field(description="trl or verl")
    watching: bool
    steps: int
    completeness: str
    advantage_computed: bool = Field(
        description="True: the advantages are grpo-web's recomputation (verl's GRPO "
        "estimator on the scores), not measured by the trainer."
    )
    evaluations: int = Field(description="Periodic evaluations read from verl's validation dumps.")
    validation_path: str = Field(description="The verl validation_data_dir read, when one was.")
    notes: list[str]
    error: str
    url: str


def _out(run: Run) -> dict:
    record = RunImport.objects.filter(run=run).first() or RunImport(source="")
    run.refresh_from_db()
    return {
        "id": run.pk,
        "name": run.name,
        "status": run.status,
        "imported": record.pk is not None,
        "source": record.source,
        "watching": record.watching,
        "steps": run.step,
        "completeness": completeness(run),
        "advantage_computed": record.advantage_computed,
        "evaluations": run.evaluations.exclude(imported_from="").count(),
        "validation_path": (import_record(run) or {}).get("validation", ""),
        "notes": record.notes,
        "error": record.error,
        "url": run.get_absolute_url(),
    }


@router.post(
    "/runs/import",
    response={201: ImportOut, 400: Errors},
    tags=["runs"],
    summary="Import a run trained elsewhere from its trainer's files on the server (TRL, verl with its validations, "
    "Trackio)",
)
def run_import_path(request, body: ImportIn):
    try:
        run = run_import(
            owner=request.user,
            source=body.source,
            path=body.path,
            name=body.name,
            model=body.model,
            options=body.options,
            watch=body.watch,
            validation_path=body.validation_path,
        )
    except ImportRefused as exc:
        return Status(400, {"errors": [str(exc)]})
    return Status(201, _out(run))


@router.post(
    "/runs/import/upload",
    response={201: ImportOut, 400: Errors},
    tags=["runs"],
    summary="Import a run trained elsewhere from uploaded files (TRL's .parquet tables, verl's {step}.jsonl dumps, "
    "a Trackio project's .db)",
)
def run_import_upload(
    request,
    files: File[list[UploadedFile]],
    source: Form[str] = "auto",
    name: Form[str] = "",
    model: Form[str] = "",
    num_generations: Form[int | None] = None,
    run: Form[str] = "",
):
    options = {"num_generations": num_generations} if num_generations else {}
    if run:
        options["run"] = run  # a Trackio project's run
    try:
        run = run_import(owner=request.user, source=source, uploads=files, name=name, model=model, options=options)
    except ImportRefused as exc:
        return Status(400, {"errors": [str(exc)]})
    return Status(201, _out(run))


@router.get(
    "/runs/{int:run_id}/import",
    response={200: ImportOut, 404: Errors},
    tags=["runs"],
    summary="An imported run's files: their source, how complete its record is, whether the folder is watched",
)
def run_import_detail(request, run_id: int):
    return _out(visible_run(request, run_id))


@router.post(
    "/runs/{int:run_id}/import/stop",
    response={200: ImportOut, 404: Errors},
    tags=["runs"],
    summary="Stop watching an imported run's folder: the run is complete with what was read",
)
def run_import_stop_api(request, run_id: int):
    run = writable_run(request, run_id)
    if not RunImport.objects.filter(run=run).exists():
        return Status(404, {"errors": ["run: not an imported run"]})
    run_import_stop(run=run)
    return _out(run)
