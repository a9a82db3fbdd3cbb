"""The JSON API over runs: list, start (from a run YAML), read, change tags/notes/pin, cancel, resume, retry, the run YAML (grpo_web/api.py
mounts this router at /api/)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from ninja import Query, Router, Schema, Status
from pydantic import Field

from grpo_web.removal import delete_answer
from runs.access import visible_run, writable_run
from runs.apischemas import Errors
from runs.deletion.services import run_delete
from runs.lifecycle.selectors import SORTS, dashboard_runs
from runs.lifecycle.services import (
    MAX_TAGS,
    NOTES_LENGTH,
    TAG_LENGTH,
    RunRefused,
    run_annotate,
    run_cancel,
    run_create,
    run_resume,
    run_retry,
)
from runs.lifecycle.spec import RunSpec, api_import
from runs.lifecycle.trl_yaml import run_yaml
from runs.models import Run
from runs.rollouts import selectors as rollout_selectors

router = Router()


class RunOut(Schema):
    id: int
    name: str
    owner: str
    shared: bool
    status: str = Field(
        description="checking (its rewards are being checked in the sandbox: then queued, or failed with a refusal), "
        "queued, running, completed, failed or cancelled."
    )
    kind: str = Field(description="grpo (TRL's GRPOTrainer) or sft (TRL's SFTTrainer).")
    step: int
    total_steps: int
    progress: float
    model: str
    dataset: str
    dataset_version_id: int | None = Field(description="None for a run trained elsewhere (dataset names its data).")
    origin: str = Field(description="app (trained here), attached (a client in your script) or imported (files).")
    rewards: list[dict] = Field(description="[{name, weight, version}] as the run uses them.")
    latest_reward: float | None = None
    latest_mean_at_k: float | None = None
    tags: list[str] = Field(description="Short labels the owner gave the run.")
    notes: str = Field(description="The owner's notes on the run.")
    created_at: str
    url: str


class RunDetail(RunOut):
    config: dict = Field(description="GRPOConfig (an SFT run: SFTConfig) fields under TRL's names.")
    config_extra: dict
    evaluation: dict
    error: str
    resumable: bool
    checkpoint_step: int
    attempt: int
    worker: str
    engine: str = Field(description="local (one worker's machine) or ray (a Ray job on a worker's cluster).")
    num_workers: int = Field(description="Ray Train workers of a Ray run; 1 for a local run.")
    reward_faults: dict
    steps: list[int] = Field(description="Steps with stored rollouts.")
    started_at: str | None
    finished_at: str | None
    pinned_metric: str = Field(description="The metric whose curve the run page's Overview shows beside the reward.")
    import_notes: list[str] = Field(
        description="What the import did with keys it did not take as they are: each names the key and says why."
    )
    refusal: list[str] = Field(
        description="Why the check before queueing refused the run (status failed, nothing trained), each message "
        "naming its field; [] when it did not."
    )


class RunPatchIn(Schema):
    tags: list[str] | None = Field(
        None, description=f"At most {MAX_TAGS} tags of at most {TAG_LENGTH} characters, no commas; replaces them."
    )
    notes: str | None = Field(None, description=f"At most {NOTES_LENGTH} characters; replaces them.")
    pinned_metric: str | None = Field(None, description="A metric name; empty unpins.")


class RunRefusedOut(Errors):
    import_notes: list[str] = Field(
        description="What the import did with keys it did not take as they are (as on a started run), so a refused "
        "file's notes are read beside its errors."
    )


class RunCreateIn(Schema):
    yaml: str | None = Field(
        None,
        description="A run YAML, as the import page and `GET /runs/{id}/config.yaml` "
        "use (TRL GRPOConfig names plus model, dataset_name, reward_funcs; "
        "`trainer: sft` for an SFT run under SFTConfig names).",
    )
    config: dict | None = Field(None, description="The same keys as a mapping, instead of yaml.")
    queue_anyway: bool = Field(False, description="Queue even while no online worker has the GPUs or vLLM asked for.")


def _run(run: Run, user, *, reward=None, mean=None) -> dict:
    return {
        "id": run.pk,
        "name": run.name,
        "owner": run.owner.username,
        "shared": run.owner_id != user.pk,
        "status": run.status,
        "kind": run.kind,
        "step": run.step,
        "total_steps": run.total_steps,
        "progress": run.progress,
        "model": run.model,
        "dataset": run.dataset_name,
        "dataset_version_id": run.dataset_version_id,
        "origin": run.origin,
        "rewards": [{k: r.get(k) for k in ("name", "weight", "version")} for r in run.rewards],
        "latest_reward": reward,
        "latest_mean_at_k": mean,
        "tags": run.tag_list,
        "notes": run.notes,
        "created_at": run.created_at.isoformat(),
        "url": run.get_absolute_url(),
    }


def _run_detail(run: Run, user) -> dict:
    return {
        **_run(run, user),
        "config": run.config,
        "config_extra": run.config_extra,
        "evaluation": run.evaluation,
        "error": run.error,
        "resumable": run.resumable,
        "checkpoint_step": run.checkpoint_step,
        "attempt": run.attempt,
        "worker": run.worker_name,
        "engine": run.engine,
        "num_workers": run.num_workers,
        "reward_faults": run.reward_faults,
        "steps": rollout_selectors.rollout_steps(run),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "pinned_metric": run.pinned_metric,
        "import_notes": run.import_notes,
        "refusal": run.refusal,
    }


@router.get("/runs", response=list[RunOut], tags=["runs"], summary="Runs you may see, as the dashboard lists them")
def runs_list(
    request,
    q: str = Query("", max_length=200, description="search name, model, dataset, tags and notes"),
    status: str = Query("", description="queued, running, completed, failed or cancelled"),
    dataset: str = Query("", description="a dataset id"),
    model: str = Query("", max_length=500),
    scope: str = Query("", description="'mine', 'shared', or empty for both"),
    team: str = Query("", description="a team id: runs shared with that team"),
    sort: str = Query("-created", description="one of " + ", ".join(SORTS) + "; a leading - reverses"),
    limit: int = Query(200, ge=1, le=1000),
):
    clean = {
        k: v.replace("\x00", "")
        for k, v in {
            "q": q,
            "status": status,
            "dataset": dataset,
            "model": model,
            "scope": scope,
            "team": team,
            "sort": sort,
        }.items()
    }
    table = dashboard_runs(request.user, limit=limit, **clean)
    return [_run(row.run, request.user, reward=row.reward, mean=row.mean_at_k) for row in table.rows]


@router.post(
    "/runs",
    response={201: RunDetail, 400: RunRefusedOut},
    tags=["runs"],
    summary="Start a run from a run YAML (or the same keys as JSON)",
    description="Answers at once. A config refused on its face is a 400 with its errors. A run with rewards of your "
    "own code is made with status `checking`: a worker checks them in the sandbox (and builds TRL's GRPOConfig), then "
    "the run is `queued`, or `failed` with `refusal` saying why (poll GET /api/runs/{id}).",
)
def run_start(request, body: RunCreateIn):
    imported = None
    try:
        imported = api_import(yaml_text=body.yaml, config=body.config, owner=request.user)
        run = run_create(owner=request.user, spec=RunSpec.from_imported(imported), queue_anyway=body.queue_anyway)
    except RunRefused as exc:
        # what the import changed is said with the refusal too: fixing the errors must not hide it
        return Status(400, {"errors": exc.errors, "import_notes": imported.notes if imported else []})
    return Status(201, _run_detail(run, request.user))


@router.get("/runs/{int:run_id}", response=RunDetail, tags=["runs"])
def run_get(request, run_id: int):
    return _run_detail(visible_run(request, run_id), request.user)


@router.patch(
    "/runs/{int:run_id}",
    response={200: RunDetail, 400: Errors},
    tags=["runs"],
    summary="Change a run's tags, notes or pinned curve (the fields given; nothing is saved if one is refused)",
)
def run_patch(request, run_id: int, body: RunPatchIn):
    run = writable_run(request, run_id)
    try:
        run = run_annotate(run=run, tags=body.tags, notes=body.notes, pinned_metric=body.pinned_metric)
    except RunRefused as exc:
        return Status(400, {"errors": exc.errors})
    return Status(200, _run_detail(run, request.user))


def _change(request, run_id: int, action) -> Status:
    run = writable_run(request, run_id)
    try:
        run = action(run=run)
    except RunRefused as exc:
        return Status(400, {"errors": exc.errors})
    return Status(200, _run_detail(run, request.user))


@router.post(
    "/runs/{int:run_id}/cancel",
    response={200: RunDetail, 400: Errors},
    tags=["runs"],
    summary="Cancel a queued or running run (training stops within seconds)",
)
def run_cancel_api(request, run_id: int):
    return _change(request, run_id, run_cancel)


@router.post(
    "/runs/{int:run_id}/resume",
    response={200: RunDetail, 400: Errors},
    tags=["runs"],
    summary="Resume a failed or cancelled run from its last checkpoint",
)
def run_resume_api(request, run_id: int):
    return _change(request, run_id, run_resume)


@router.post(
    "/runs/{int:run_id}/retry",
    response={200: RunDetail, 400: Errors},
    tags=["runs"],
    summary="Start a finished run again from scratch",
)
def run_retry_api(request, run_id: int):
    return _change(request, run_id, run_retry)


@router.get(
    "/runs/{int:run_id}/config.yaml",
    tags=["runs"],
    summary="The run as a YAML that POST /runs takes back",
    openapi_extra={
        "responses": {
            200: {"description": "The run YAML", "content": {"application/yaml": {"schema": {"type": "string"}}}}
        }
    },
)
def run_config_yaml(request, run_id: int):
    return HttpResponse(run_yaml(visible_run(request, run_id)), content_type="application/yaml; charset=utf-8")


@router.delete(
    "/runs/{int:run_id}",
    response={204: None, 409: Errors},
    tags=["runs"],
    summary="Delete a finished run of yours with its rollouts, metrics, evaluations and folder (409: why not)",
)
def run_delete_api(request, run_id: int):
    run = get_object_or_404(Run, pk=run_id, owner=request.user)
    return delete_answer(lambda: run_delete(run=run, user=request.user))
