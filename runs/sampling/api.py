"""The JSON API over rejection-sampling jobs: list, queue, read, page through samples (grpo_web/api.py mounts this
router at /api/)."""

from __future__ import annotations

from dataclasses import fields

from django.shortcuts import get_object_or_404
from ninja import Query, Router, Schema, Status
from pydantic import Field

from rewards.models import RewardFunction
from runs.access import visible_versions
from runs.apischemas import Errors
from runs.sampling.selectors import owned_jobs, samples_page
from runs.sampling.services import JobRefused, RejectionSettings, rejection_job_create

router = Router()


class RejectionJobIn(Schema):
    name: str = Field(max_length=200)
    model: str = Field(max_length=500, description="'tiny', 'tiny-sft', a model folder (GET /models), or a hub id.")
    dataset_version: int = Field(description="The version whose prompts are sampled.")
    split: str = Field("all", description="train, eval or all.")
    rewards: list[str] = Field(description="Names of your (or shared) reward functions, each at its latest version.")
    mix_version: int | None = Field(None, description="A version with a completion column whose rows are mixed in.")
    settings: dict = Field(
        default_factory=dict,
        description="k, threshold, solved_by, max_per_prompt, temperature, "
        "max_new_tokens, max_prompts, mix_rows, seed.",
    )


def _job(job) -> dict:
    return {
        "id": job.pk,
        "name": job.name,
        "model": job.model,
        "dataset_version_id": job.dataset_version_id,
        "split": job.split,
        "rewards": [{k: r.get(k) for k in ("name", "weight", "version")} for r in job.rewards],
        "settings": job.settings,
        "status": job.status,
        "error": job.error,
        "stats": job.stats,
        "output_version_id": job.output_version_id,
        "created_at": job.created_at.isoformat(),
        "url": job.get_absolute_url(),
    }


@router.get("/rejection-jobs", response=list[dict], tags=["rejection sampling"], summary="Your rejection-sampling jobs")
def rejection_jobs(request):
    return [_job(job) for job in owned_jobs(request.user)]


@router.post(
    "/rejection-jobs",
    response={201: dict, 400: Errors},
    tags=["rejection sampling"],
    summary="Queue a rejection-sampling job: k samples per prompt, the kept ones saved as an SFT dataset",
)
def rejection_job_start(request, body: RejectionJobIn):
    versions = visible_versions(request.user)
    version = versions.filter(pk=body.dataset_version).first()
    mix = versions.filter(pk=body.mix_version).first() if body.mix_version is not None else None
    errors = [] if version else [f"dataset_version: you have no dataset version {body.dataset_version}"]
    if body.mix_version is not None and mix is None:
        errors.append(f"mix_version: you have no dataset version {body.mix_version}")
    known = {f.name for f in fields(RejectionSettings)}
    errors += [
        f"settings: {key} is not a setting ({', '.join(sorted(known))})" for key in body.settings if key not in known
    ]
    rewards = []
    for name in body.rewards:
        rf = RewardFunction.objects.visible_to(request.user).filter(name=name, versions__isnull=False).first()
        if rf is None:
            errors.append(f"rewards: you have no reward function {name!r}")
        else:
            rewards.append(
                {
                    "name": rf.name,
                    "weight": 1.0,
                    "version_id": rf.latest_version.pk,
                    "version": rf.latest_version.number,
                }
            )
    if errors:
        return Status(400, {"errors": errors})
    try:
        job = rejection_job_create(
            owner=request.user,
            name=body.name,
            model=body.model,
            dataset_version=version,
            rewards=rewards,
            settings=RejectionSettings(**body.settings),
            split=body.split,
            mix_version=mix,
        )
    except (JobRefused, TypeError) as exc:
        return Status(400, {"errors": getattr(exc, "errors", [str(exc)])})
    return Status(201, _job(job))


@router.get("/rejection-jobs/{int:job_id}", response=dict, tags=["rejection sampling"])
def rejection_job_get(request, job_id: int):
    return _job(get_object_or_404(owned_jobs(request.user), pk=job_id))


@router.get(
    "/rejection-jobs/{int:job_id}/samples",
    response=dict,
    tags=["rejection sampling"],
    summary="A page of a job's samples; show: kept, passed, rejected or duplicate",
)
def rejection_job_samples(request, job_id: int, show: str = "", page: int = Query(1, ge=1)):
    job = get_object_or_404(owned_jobs(request.user), pk=job_id)
    found = samples_page(job, show=show, page=page)
    return {
        "page": found.number,
        "pages": found.paginator.num_pages,
        "samples": [
            {
                "prompt_index": s.prompt_index,
                "sample": s.sample,
                "prompt": s.prompt,
                "completion": s.completion,
                "rewards": s.rewards,
                "reward": s.reward,
                "passed": s.passed,
                "duplicate": s.duplicate,
                "kept": s.kept,
            }
            for s in found
        ],
    }
