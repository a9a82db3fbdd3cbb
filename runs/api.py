"""The JSON API over datasets, runs, rollouts, metrics and evaluations (grpo_web/api.py mounts it at /api/).

Each endpoint is a thin adapter over the same selectors and services the pages use, and asks the same question of
grpo_web.sharing: an object the caller may not see is a 404, one they may see but not change answers 404 to a change.
Who the caller is (a session or a personal access token) and what a read-only token may do is settled before any of
this runs (grpo_web/api.py)."""

from __future__ import annotations

from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import File, Form, Query, Router, Schema, Status
from ninja.errors import HttpError
from ninja.files import UploadedFile
from pydantic import Field

from grpo_web.sharing import teams_of
from runs.access import async_chunks, visible_run, writable_run
from runs.datasets import selectors as dataset_selectors
from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import
from runs.evaluations import selectors as evaluation_selectors
from runs.evaluations.forms import EvaluationForm
from runs.evaluations.services import EvaluationRefused, evaluation_create
from runs.lifecycle.selectors import SORTS, dashboard_runs
from runs.lifecycle.services import RunRefused, run_cancel, run_create, run_resume, run_retry
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.trl_yaml import run_yaml
from runs.models import Dataset, DatasetVersion, Run
from runs.rollouts import selectors as rollout_selectors
from runs.rollouts.exports import jsonl_chunks, parquet_chunks
from runs.rollouts.filters import RolloutFilterForm, SearchTooSlow, rollout_page

router = Router()


class Errors(Schema):
    errors: list[str] = Field(description="What is wrong, each naming the field, row or column.")


class FieldErrors(Schema):
    errors: dict[str, list[str]] = Field(description="Per query parameter, what is wrong with it.")


class Me(Schema):
    username: str
    teams: list[str]
    scope: str = Field(description="'write' for a session or a write token, 'read' for a read token.")


@router.get("/me", response=Me, tags=["account"], summary="Who the token or session belongs to")
def me(request):
    return {"username": request.user.username, "teams": [t.name for t in teams_of(request.user)],
            "scope": getattr(request, "token_scope", "write")}


# --- datasets ------------------------------------------------------------------------------------------------------

class VersionOut(Schema):
    id: int
    number: int
    row_count: int
    columns: list[str]
    train_rows: int
    eval_rows: int
    prompt_format: str
    source_name: str
    created_at: str
    url: str


class DatasetOut(Schema):
    id: int
    name: str
    owner: str
    shared: bool = Field(description="True when a team shares it with you (you are not its owner).")
    created_at: str
    latest_version: VersionOut | None
    url: str


class DatasetDetail(DatasetOut):
    versions: list[VersionOut]


class RowsOut(Schema):
    rows: list[dict]
    columns: list[str]
    page: int
    pages: int
    total: int


def _version(v: DatasetVersion) -> dict:
    return {"id": v.pk, "number": v.number, "row_count": v.row_count, "columns": list(v.columns or []),
            "train_rows": v.train_rows, "eval_rows": v.eval_rows, "prompt_format": v.prompt_format,
            "source_name": v.source_name, "created_at": v.created_at.isoformat(), "url": v.get_absolute_url()}


def _dataset(d: Dataset, user, versions: list[DatasetVersion] | None = None) -> dict:
    versions = versions if versions is not None else sorted(d.versions.all(), key=lambda v: -v.number)
    return {"id": d.pk, "name": d.name, "owner": d.owner.username, "shared": d.owner_id != user.pk,
            "created_at": d.created_at.isoformat(), "latest_version": _version(versions[0]) if versions else None,
            "url": d.get_absolute_url()}


@router.get("/datasets", response=list[DatasetOut], tags=["datasets"], summary="Datasets you own or that are shared "
                                                                                "with you")
def datasets_list(request, scope: str = Query("", description="'mine', 'shared', or empty for both")):
    qs = Dataset.objects.visible_to(request.user).select_related("owner").prefetch_related("versions")
    if scope == "mine":
        qs = qs.filter(owner=request.user)
    elif scope == "shared":
        qs = qs.exclude(owner=request.user)
    return [_dataset(d, request.user) for d in qs[:1000]]


@router.get("/datasets/{int:dataset_id}", response=DatasetDetail, tags=["datasets"])
def dataset_get(request, dataset_id: int):
    d = get_object_or_404(Dataset.objects.visible_to(request.user).select_related("owner"), pk=dataset_id)
    versions = dataset_selectors.dataset_versions(d)
    return {**_dataset(d, request.user, versions), "versions": [_version(v) for v in versions]}


@router.get("/datasets/{int:dataset_id}/versions/{int:number}/rows", response=RowsOut, tags=["datasets"],
            summary="One page of a version's rows, optionally searched")
def dataset_rows(request, dataset_id: int, number: int, q: str = Query("", max_length=200), page: int = Query(1, ge=1)):
    version = get_object_or_404(DatasetVersion, dataset__in=Dataset.objects.visible_to(request.user),
                                dataset_id=dataset_id, number=number)
    rows = dataset_selectors.dataset_rows(version, q=q.replace("\x00", ""), page=page)
    columns = list(version.columns or [])
    return {"rows": [{"row": number, **dict(zip(columns, cells))} for number, cells in rows.rows], "columns": columns,
            "page": rows.number, "pages": rows.pages, "total": rows.total}


def _upload(request, *, file: UploadedFile, name: str, dataset: Dataset | None, prompt_column: str,
            gsm8k_column: str):
    try:
        version = dataset_import(owner=request.user, name=name, dataset=dataset, stream=file,
                                 source_name=file.name or "upload", prompt_column=prompt_column,
                                 gsm8k_column=gsm8k_column.strip())
    except DatasetError as exc:
        return Status(400, {"errors": exc.errors})
    return Status(201, _version(version))


@router.post("/datasets", response={201: VersionOut, 400: Errors}, tags=["datasets"],
             summary="Upload a new dataset (JSONL, CSV, Parquet or JSON, as on the upload page)")
def dataset_create(request, file: File[UploadedFile], name: Form[str] = "", prompt_column: Form[str] = "prompt",
                   gsm8k_column: Form[str] = ""):
    return _upload(request, file=file, name=name, dataset=None, prompt_column=prompt_column,
                   gsm8k_column=gsm8k_column)


@router.post("/datasets/{int:dataset_id}/versions", response={201: VersionOut, 400: Errors}, tags=["datasets"],
             summary="Upload a new version of a dataset you may change")
def dataset_version_create(request, dataset_id: int, file: File[UploadedFile], prompt_column: Form[str] = "prompt",
                           gsm8k_column: Form[str] = ""):
    dataset = get_object_or_404(Dataset.objects.visible_to(request.user, write=True), pk=dataset_id)
    return _upload(request, file=file, name=dataset.name, dataset=dataset, prompt_column=prompt_column,
                   gsm8k_column=gsm8k_column)


# --- runs ----------------------------------------------------------------------------------------------------------

class RunOut(Schema):
    id: int
    name: str
    owner: str
    shared: bool
    status: str
    kind: str = Field(description="grpo (TRL's GRPOTrainer) or sft (TRL's SFTTrainer).")
    step: int
    total_steps: int
    progress: float
    model: str
    dataset: str
    dataset_version_id: int
    rewards: list[dict] = Field(description="[{name, weight, version}] as the run uses them.")
    latest_reward: float | None = None
    latest_mean_at_k: float | None = None
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


class RunCreateIn(Schema):
    yaml: str | None = Field(None, description="A run YAML, as the import page and `GET /runs/{id}/config.yaml` "
                                               "use (TRL GRPOConfig names plus model, dataset_name, reward_funcs; "
                                               "`trainer: sft` for an SFT run under SFTConfig names).")
    config: dict | None = Field(None, description="The same keys as a mapping, instead of yaml.")
    queue_anyway: bool = Field(False, description="Queue even while no online worker has the GPUs or vLLM asked "
                                                  "for.")


def _run(run: Run, user, *, reward=None, mean=None) -> dict:
    return {"id": run.pk, "name": run.name, "owner": run.owner.username, "shared": run.owner_id != user.pk,
            "status": run.status, "kind": run.kind, "step": run.step, "total_steps": run.total_steps, "progress": run.progress,
            "model": run.model, "dataset": str(run.dataset_version), "dataset_version_id": run.dataset_version_id,
            "rewards": [{k: r.get(k) for k in ("name", "weight", "version")} for r in run.rewards],
            "latest_reward": reward, "latest_mean_at_k": mean, "created_at": run.created_at.isoformat(),
            "url": run.get_absolute_url()}


def _run_detail(run: Run, user) -> dict:
    table = dashboard_runs(user, q="", limit=1) if False else None  # noqa: F841  (figures come from the list view)
    return {**_run(run, user), "config": run.config, "config_extra": run.config_extra, "evaluation": run.evaluation,
            "error": run.error, "resumable": run.resumable, "checkpoint_step": run.checkpoint_step,
            "attempt": run.attempt, "worker": run.worker_name, "engine": run.engine, "num_workers": run.num_workers, "reward_faults": run.reward_faults,
            "steps": rollout_selectors.rollout_steps(run),
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None}


@router.get("/runs", response=list[RunOut], tags=["runs"], summary="Runs you may see, as the dashboard lists them")
def runs_list(request, q: str = Query("", max_length=200, description="search name, model and dataset"),
              status: str = Query("", description="queued, running, completed, failed or cancelled"),
              dataset: str = Query("", description="a dataset id"), model: str = Query("", max_length=500),
              scope: str = Query("", description="'mine', 'shared', or empty for both"),
              team: str = Query("", description="a team id: runs shared with that team"),
              sort: str = Query("-created", description="one of " + ", ".join(SORTS) + "; a leading - reverses"),
              limit: int = Query(200, ge=1, le=1000)):
    clean = {k: v.replace("\x00", "") for k, v in
             {"q": q, "status": status, "dataset": dataset, "model": model, "scope": scope, "team": team,
              "sort": sort}.items()}
    table = dashboard_runs(request.user, limit=limit, **clean)
    return [_run(row.run, request.user, reward=row.reward, mean=row.mean_at_k) for row in table.rows]


@router.post("/runs", response={201: RunDetail, 400: Errors}, tags=["runs"],
             summary="Start a run from a run YAML (or the same keys as JSON)")
def run_start(request, body: RunCreateIn):
    try:
        run = run_create(owner=request.user, spec=RunSpec.from_api(yaml_text=body.yaml, config=body.config,
                                                                   owner=request.user), queue_anyway=body.queue_anyway)
    except RunRefused as exc:
        return Status(400, {"errors": exc.errors})
    return Status(201, _run_detail(run, request.user))


@router.get("/runs/{int:run_id}", response=RunDetail, tags=["runs"])
def run_get(request, run_id: int):
    return _run_detail(visible_run(request, run_id), request.user)


def _change(request, run_id: int, action) -> Status:
    run = writable_run(request, run_id)
    try:
        run = action(run=run)
    except RunRefused as exc:
        return Status(400, {"errors": exc.errors})
    return Status(200, _run_detail(run, request.user))


@router.post("/runs/{int:run_id}/cancel", response={200: RunDetail, 400: Errors}, tags=["runs"],
             summary="Cancel a queued or running run (training stops within seconds)")
def run_cancel_api(request, run_id: int):
    return _change(request, run_id, run_cancel)


@router.post("/runs/{int:run_id}/resume", response={200: RunDetail, 400: Errors}, tags=["runs"],
             summary="Resume a failed or cancelled run from its last checkpoint")
def run_resume_api(request, run_id: int):
    return _change(request, run_id, run_resume)


@router.post("/runs/{int:run_id}/retry", response={200: RunDetail, 400: Errors}, tags=["runs"],
             summary="Start a finished run again from scratch")
def run_retry_api(request, run_id: int):
    return _change(request, run_id, run_retry)


@router.get("/runs/{int:run_id}/config.yaml", tags=["runs"], summary="The run as a YAML that POST /runs takes back",
            openapi_extra={"responses": {200: {"description": "The run YAML", "content": {
                "application/yaml": {"schema": {"type": "string"}}}}}})
def run_config_yaml(request, run_id: int):
    return HttpResponse(run_yaml(visible_run(request, run_id)), content_type="application/yaml; charset=utf-8")


@router.get("/runs/{int:run_id}/metrics", response=dict, tags=["metrics"],
            summary="TRL's logged metrics per step; smooth: TensorBoard's smoothing weight")
def run_metrics(request, run_id: int, smooth: float = Query(0.0, ge=0, lt=1)):
    return rollout_selectors.metric_series(visible_run(request, run_id), smooth=smooth)


@router.get("/runs/{int:run_id}/steps/{int:step}", response=dict, tags=["rollouts"],
            summary="A page of one step's groups: completions, per-function rewards, advantages")
def run_step(request, run_id: int, step: int, first_group: int = Query(0, ge=0, alias="from"),
             groups: int = Query(rollout_selectors.STEP_GROUPS_PAGE, ge=1, le=256)):
    run = visible_run(request, run_id)
    return {"step": step, "reward_names": run.reward_names, "scale_rewards": run.config.get("scale_rewards"),
            "aggregation": run.config.get("multi_objective_aggregation", "sum_then_normalize"),
            **rollout_selectors.step_view(run, step, first_group=first_group, groups=groups)}


class RolloutFilters(Schema):
    """The rollout browser's filters, under the same names as its URL."""

    step_min: int | None = Field(None, ge=0)
    step_max: int | None = Field(None, ge=0)
    reward_min: float | None = None
    reward_max: float | None = None
    adv_min: float | None = Field(None, description="advantage ≥")
    adv_max: float | None = Field(None, description="advantage ≤")
    len_min: int | None = Field(None, ge=0, description="completion tokens ≥")
    len_max: int | None = Field(None, ge=0, description="completion tokens ≤")
    first_step_below: float | None = Field(None, description="the first scored reasoning step's process score <")
    truncated: str | None = Field(None, description="yes or no")
    zero_std: str | None = Field(None, description="yes or no: in a zero-variance group")
    reflective: str | None = Field(None, description="yes or no: has a self-reflection phrase")
    reflection: str | None = Field(None, description="one of the run's reflection phrases")
    phrase: str | None = Field(None, description="completion contains (exact text)")
    q: str | None = Field(None, description="full-text search of prompt and completion")
    prompt: str | None = Field(None, description="a prompt key")
    ids: str | None = Field(None, description="rollout ids, comma-separated (a detector's examples)")
    sort: str | None = Field(None, description="the browser's sort keys")
    after: str | None = Field(None, description="the cursor of the next page (next_cursor)")


class RolloutsOut(Schema):
    reward_names: list[str]
    rows: list[dict]
    next_cursor: str | None = Field(description="Pass as after= for the next page; null on the last page.")


def _filters(request, run: Run):
    # the browser's own form validates, so the API and the page can never disagree on what a filter means
    form = RolloutFilterForm(request.GET, run=run)
    if not form.is_valid():
        raise HttpError(400, "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()))
    return form.cleaned_data


@router.get("/runs/{int:run_id}/rollouts", response=RolloutsOut, tags=["rollouts"],
            summary="Stored rollouts with the rollout browser's filters, a page at a time")
def run_rollouts(request, run_id: int, filters: Query[RolloutFilters]):
    run = visible_run(request, run_id)
    try:
        page = rollout_page(run, _filters(request, run))
    except SearchTooSlow as exc:
        raise HttpError(422, str(exc)) from None
    names = run.reward_names
    rows = [{**r, "rewards": dict(zip(names, r["rewards"]))} for r in page.rows]
    return {"reward_names": names, "rows": rows, "next_cursor": page.next_cursor or None}


@router.get("/runs/{int:run_id}/rollouts/export", tags=["rollouts"], openapi_extra={"responses": {200: {
    "description": "The rows, streamed", "content": {"application/x-ndjson": {"schema": {"type": "string"}},
                                                     "application/vnd.apache.parquet": {"schema": {
                                                         "type": "string", "format": "binary"}}}}}},
            summary="Every rollout the filters select, as JSON lines (format=jsonl) or Parquet (format=parquet)")
def run_rollouts_export(request, run_id: int, filters: Query[RolloutFilters],
                        format: str = Query("jsonl", pattern="^(jsonl|parquet)$")):
    run = visible_run(request, run_id)
    data = _filters(request, run)
    chunks, content_type = ((jsonl_chunks, "application/x-ndjson") if format == "jsonl" else
                            (parquet_chunks, "application/vnd.apache.parquet"))
    response = StreamingHttpResponse(async_chunks(chunks(run, data)), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-rollouts.{format}"'
    return response


# --- evaluations -------------------------------------------------------------------------------------------------

class EvaluationIn(Schema):
    model: str | None = Field(None, description="One of the run page's model choices (base by default; the final "
                                                "model, a checkpoint, or another model with model_path).")
    model_path: str = ""
    dataset_version: int = Field(description="A dataset version id you may see.")
    split: str = "eval"
    eval_num_samples: int | None = None
    eval_max_prompts: int | None = None
    eval_temperature: float | None = None
    eval_solved_by: str | None = None
    eval_threshold: float | None = None


@router.get("/runs/{int:run_id}/evaluations", response=dict, tags=["evaluations"],
            summary="Every evaluation of the run with mean@k, pass@k, maj@k, greedy and the change against the base")
def run_evaluations(request, run_id: int):
    run = visible_run(request, run_id)
    return {"reward_names": run.reward_names, **evaluation_selectors.run_evaluations(run)}


@router.post("/runs/{int:run_id}/evaluations", response={202: dict, 400: Errors}, tags=["evaluations"],
             summary="Queue a standalone evaluation of one of the run's models")
def run_evaluate(request, run_id: int, body: EvaluationIn):
    run = writable_run(request, run_id)
    # what the caller leaves out takes the run page's defaults (the run's own evaluation settings)
    data = {**EvaluationForm(run=run).initial, **{k: v for k, v in body.dict().items() if v is not None}}
    form = EvaluationForm({k: "" if v is None else v for k, v in data.items()}, run=run)
    if not form.is_valid():
        return Status(400, {"errors": [f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items()]})
    try:
        evaluation = evaluation_create(run=run, **form.evaluation_args())
    except EvaluationRefused as exc:
        return Status(400, {"errors": exc.errors})
    return Status(202, {"id": evaluation.pk, "label": evaluation.label, "status": evaluation.status,
                 "url": reverse("evaluation_detail", args=[run.pk, evaluation.pk])})


# --- rejection-sampling jobs (runs.sampling) and models (runs.registry) ---------------------------------------------

class RejectionJobIn(Schema):
    name: str = Field(max_length=200)
    model: str = Field(max_length=500, description="'tiny', 'tiny-sft', a model folder (GET /models), or a hub id.")
    dataset_version: int = Field(description="The version whose prompts are sampled.")
    split: str = Field("all", description="train, eval or all.")
    rewards: list[str] = Field(description="Names of your (or shared) reward functions, each at its latest version.")
    mix_version: int | None = Field(None, description="A version with a completion column whose rows are mixed in.")
    settings: dict = Field(default_factory=dict, description="k, threshold, solved_by, max_per_prompt, temperature, "
                                                              "max_new_tokens, max_prompts, mix_rows, seed.")


def _job(job) -> dict:
    return {"id": job.pk, "name": job.name, "model": job.model, "dataset_version_id": job.dataset_version_id,
            "split": job.split, "rewards": [{k: r.get(k) for k in ("name", "weight", "version")} for r in job.rewards],
            "settings": job.settings, "status": job.status, "error": job.error, "stats": job.stats,
            "output_version_id": job.output_version_id, "created_at": job.created_at.isoformat(),
            "url": job.get_absolute_url()}


@router.get("/rejection-jobs", response=list[dict], tags=["rejection sampling"], summary="Your rejection-sampling jobs")
def rejection_jobs(request):
    from runs.sampling.selectors import owned_jobs

    return [_job(job) for job in owned_jobs(request.user)]


@router.post("/rejection-jobs", response={201: dict, 400: Errors}, tags=["rejection sampling"],
             summary="Queue a rejection-sampling job: k samples per prompt, the kept ones saved as an SFT dataset")
def rejection_job_start(request, body: RejectionJobIn):
    from dataclasses import fields

    from rewards.models import RewardFunction
    from runs.access import visible_versions
    from runs.sampling.services import JobRefused, RejectionSettings, rejection_job_create

    versions = visible_versions(request.user)
    version = versions.filter(pk=body.dataset_version).first()
    mix = versions.filter(pk=body.mix_version).first() if body.mix_version is not None else None
    errors = [] if version else [f"dataset_version: you have no dataset version {body.dataset_version}"]
    if body.mix_version is not None and mix is None:
        errors.append(f"mix_version: you have no dataset version {body.mix_version}")
    known = {f.name for f in fields(RejectionSettings)}
    errors += [f"settings: {key} is not a setting ({', '.join(sorted(known))})" for key in body.settings
               if key not in known]
    rewards = []
    for name in body.rewards:
        rf = RewardFunction.objects.visible_to(request.user).filter(name=name, versions__isnull=False).first()
        if rf is None:
            errors.append(f"rewards: you have no reward function {name!r}")
        else:
            rewards.append({"name": rf.name, "weight": 1.0, "version_id": rf.latest_version.pk,
                            "version": rf.latest_version.number})
    if errors:
        return Status(400, {"errors": errors})
    try:
        job = rejection_job_create(owner=request.user, name=body.name, model=body.model, dataset_version=version,
                                   rewards=rewards, settings=RejectionSettings(**body.settings), split=body.split,
                                   mix_version=mix)
    except (JobRefused, TypeError) as exc:
        return Status(400, {"errors": getattr(exc, "errors", [str(exc)])})
    return Status(201, _job(job))


@router.get("/rejection-jobs/{int:job_id}", response=dict, tags=["rejection sampling"])
def rejection_job_get(request, job_id: int):
    from runs.sampling.selectors import owned_jobs

    return _job(get_object_or_404(owned_jobs(request.user), pk=job_id))


@router.get("/rejection-jobs/{int:job_id}/samples", response=dict, tags=["rejection sampling"],
            summary="A page of a job's samples; show: kept, passed, rejected or duplicate")
def rejection_job_samples(request, job_id: int, show: str = "", page: int = Query(1, ge=1)):
    from runs.sampling.selectors import owned_jobs, samples_page

    job = get_object_or_404(owned_jobs(request.user), pk=job_id)
    found = samples_page(job, show=show, page=page)
    return {"page": found.number, "pages": found.paginator.num_pages, "samples": [
        {"prompt_index": s.prompt_index, "sample": s.sample, "prompt": s.prompt, "completion": s.completion,
         "rewards": s.rewards, "reward": s.reward, "passed": s.passed, "duplicate": s.duplicate, "kept": s.kept}
        for s in found]}


@router.get("/models", response=list[dict], tags=["models"],
            summary="Models your runs made and the base models they started from, with lineage")
def models_list(request):
    from runs.registry.selectors import registry

    def parent(entry):
        if entry.parent is None:
            return None
        return entry.parent.key if entry.parent.is_base else {"run_id": entry.parent.run.pk, "key": entry.parent.key}

    return [{"key": e.key, "path": e.path, "base": e.is_base, "run_id": e.run.pk if e.run else None,
             "kind": e.run.kind if e.run else None, "from": parent(e), "used_by": [r.pk for r in e.used_by],
             "download": reverse("model_download", args=[e.run.pk, e.key]) if e.run else None}
            for e in registry(request.user)]


# --- recipes (runs.recipes) ------------------------------------------------------------------------------------------

class RecipeIn(Schema):
    name: str = Field("", max_length=200)
    template: str | None = Field(None, description="R1, R1-Zero or distill; or give stages.")
    prompts: int | None = Field(None, description="A template's dataset version of prompts.")
    sft: int | None = Field(None, description="A template's dataset version of worked answers (completion column).")
    stages: list[dict] | None = Field(None, description="[{kind, name, model, dataset, rewards, config, settings}]; "
                                                        "model/dataset may name an earlier stage as 'stage:N'.")


def _recipe(recipe) -> dict:
    from runs.recipes.selectors import pipeline

    return {"id": recipe.pk, "name": recipe.name, "status": recipe.status, "current_stage": recipe.current + 1,
            "error": recipe.error, "stages": recipe.stages, "pipeline": pipeline(recipe),
            "parent": recipe.parent_id, "url": recipe.get_absolute_url()}


def _owned_recipe(request, recipe_id):
    from runs.models import Recipe

    return get_object_or_404(Recipe.objects.filter(owner=request.user), pk=recipe_id)


@router.get("/recipes", response=list[dict], tags=["recipes"], summary="Your recipes")
def recipes_list(request):
    from runs.models import Recipe

    return [_recipe(r) for r in Recipe.objects.filter(owner=request.user)]


@router.post("/recipes", response={201: dict, 400: Errors}, tags=["recipes"],
             summary="Make a recipe (a draft) from a template or from stages")
def recipe_make(request, body: RecipeIn):
    from runs.access import visible_versions
    from runs.recipes.services import TEMPLATES, RecipeRefused, recipe_create, recipe_from_template

    try:
        if body.stages is not None:
            recipe = recipe_create(owner=request.user, name=body.name or "recipe", stages=body.stages)
        else:
            versions = visible_versions(request.user)
            prompts = versions.filter(pk=body.prompts).first() if body.prompts is not None else None
            sft = versions.filter(pk=body.sft).first() if body.sft is not None else None
            if body.template not in TEMPLATES or prompts is None:
                return Status(400, {"errors": [f"template: one of {', '.join(TEMPLATES)}, with prompts: a dataset "
                                               f"version of yours"]})
            recipe = recipe_from_template(owner=request.user, name=body.name or body.template,
                                          template=body.template, prompts=prompts, sft=sft)
    except RecipeRefused as exc:
        return Status(400, {"errors": exc.errors})
    return Status(201, _recipe(recipe))


@router.get("/recipes/{int:recipe_id}", response=dict, tags=["recipes"])
def recipe_get(request, recipe_id: int):
    return _recipe(_owned_recipe(request, recipe_id))


@router.post("/recipes/{int:recipe_id}/{action}", response={200: dict, 400: Errors}, tags=["recipes"],
             summary="start, cancel or resume (from the failed stage) a recipe")
def recipe_act(request, recipe_id: int, action: str):
    from runs.recipes.services import RecipeRefused, recipe_cancel, recipe_resume, recipe_start

    recipe = _owned_recipe(request, recipe_id)
    actions = {"start": recipe_start, "cancel": recipe_cancel, "resume": recipe_resume}
    if action not in actions:
        return Status(400, {"errors": ["action: start, cancel or resume"]})
    try:
        actions[action](recipe=recipe)
    except RecipeRefused as exc:
        return Status(400, {"errors": exc.errors})
    recipe.refresh_from_db()
    return Status(200, _recipe(recipe))
