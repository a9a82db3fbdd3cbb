"""What a delete would remove, and what stands in its way: the plans (grpo_web.removal.Removal) the confirmation
pages show and the services check. What depends on an object is looked for among everyone's runs and jobs, not only
the owner's: a team member's run on a shared dataset depends on it as much as the owner's own."""

from __future__ import annotations

from django.db.models import Q

from grpo_web.removal import Removal, counted, existing
from runs.models import (
    Dataset,
    DatasetImport,
    DatasetVersion,
    Evaluation,
    Recipe,
    RejectionJob,
    Replay,
    Rollout,
    Run,
    StepMetric,
)
from runs.paths import checkpoint_path, resolve_model
from runs.registry.selectors import made_model

UNFINISHED = Q(status__in=(Run.Status.QUEUED, Run.Status.RUNNING))


def _whose(obj) -> str:
    return obj.owner.username


def started_from(run: Run, key: str | None = None) -> list[str]:
    """What trains, samples or evaluates on a model ``run`` made ("final", "checkpoint-N"; any of them when
    ``key`` is None): every run that started from it, and the jobs and evaluations not yet finished."""
    uid = str(run.uid)
    found = []

    def uses(model: str) -> str | None:
        made = made_model(resolve_model(model))
        return made[1] if made and made[0] == uid and (key is None or made[1] == key) else None

    for other in Run.objects.filter(model__contains=uid).exclude(pk=run.pk).select_related("owner"):
        if which := uses(other.model):
            found.append(f"run '{other.name}' of {_whose(other)} (it starts from {which})")
    for job in RejectionJob.objects.filter(UNFINISHED, model__contains=uid).select_related("owner"):
        if which := uses(job.model):
            found.append(f"rejection-sampling job '{job.name}' of {_whose(job)} (it samples {which})")
    for evaluation in Evaluation.objects.filter(UNFINISHED, model__contains=uid).select_related("run"):
        if which := uses(evaluation.model):
            found.append(f"evaluation '{evaluation.label}' of run '{evaluation.run.name}' (it evaluates {which})")
    return found


def run_removal(run: Run) -> Removal:
    label = f"the run '{run.name}'"
    refusals = []
    if not run.is_finished:
        refusals.append(f"{label} is {run.status}: cancel it first")
    if run.evaluations.filter(UNFINISHED).exists():
        refusals.append(f"{label} has an evaluation under way: wait for it or cancel it first")
    if run.replays.filter(UNFINISHED).exists():
        refusals.append(f"{label} has a reward replay under way: wait for it to finish first")
    refusals += [f"{label} made the model of {who}: delete that first" for who in started_from(run)]
    for recipe in Recipe.objects.filter(status=Recipe.Status.RUNNING):  # a later stage reads its model or run
        if any(run.pk in (o.get("run"), o.get("evaluated_run")) for o in recipe.outputs or []):
            refusals.append(f"{label} is a stage of recipe '{recipe.name}', still running: wait for it or cancel it")
    return Removal(
        label=label,
        rows=[
            label,
            counted(Rollout.objects.filter(run=run).count(), "rollout"),
            counted(StepMetric.objects.filter(run=run).count(), "logged step"),
            counted(run.evaluations.count(), "evaluation"),
            counted(Replay.objects.filter(run=run).count(), "reward replay"),
            counted(run.shares.count(), "team share"),
        ],
        paths=existing([run.run_dir]),
        refusals=refusals,
    )


def dataset_removal(dataset: Dataset) -> Removal:
    label = f"the dataset '{dataset.name}'"
    versions = list(dataset.versions.all())
    refusals = []
    for run in Run.objects.filter(dataset_version__dataset=dataset).select_related("owner", "dataset_version"):
        refusals.append(
            f"v{run.dataset_version.number} is the data of run '{run.name}' of {_whose(run)}: delete the run first"
        )
    for evaluation in (
        Evaluation.objects.filter(dataset_version__dataset=dataset)
        .exclude(
            run__dataset_version__dataset=dataset  # said once, with its run, above
        )
        .select_related("run", "dataset_version")
    ):
        refusals.append(
            f"v{evaluation.dataset_version.number} holds the prompts of evaluation '{evaluation.label}' of run "
            f"'{evaluation.run.name}': delete that run first"
        )
    jobs = RejectionJob.objects.filter(
        Q(dataset_version__dataset=dataset) | Q(mix_version__dataset=dataset)
    ).select_related("owner")
    refusals += [f"rejection-sampling job '{job.name}' of {_whose(job)} samples from it or mixes it in" for job in jobs]
    if DatasetImport.objects.filter(dataset=dataset).exclude(status__in=DatasetImport.FINISHED).exists():
        refusals.append(f"an import into {label} is under way: wait for it to finish first")
    # a rows file is shared by the mappings of one upload; one another dataset's version still reads stays
    files = {v.path for v in versions}
    kept = set(DatasetVersion.objects.filter(path__in=files).exclude(dataset=dataset).values_list("path", flat=True))
    return Removal(
        label=label,
        rows=[
            label,
            counted(len(versions), "version"),
            counted(sum(v.row_count for v in versions), "stored row"),
            counted(dataset.imports.count(), "import record"),
            counted(dataset.shares.count(), "team share"),
        ],
        paths=existing(sorted(files - kept)),
        refusals=refusals,
    )


def resumes_from(run: Run, key: str) -> bool:
    """Whether ``key`` is the checkpoint the run would resume from."""
    resume = checkpoint_path(run)
    return run.resumable and resume is not None and resume.name == key


def model_removal(run: Run, key: str) -> Removal:
    label = f"the model {key} of run '{run.name}'"
    refusals = []
    if not run.is_finished:
        refusals.append(f"run '{run.name}' is {run.status}: its models change while it trains; cancel it first")
    refusals += [f"{label} is the model of {who}: delete that first" for who in started_from(run, key)]
    rows = [label]
    if resumes_from(run, key):
        rows.append(f"run '{run.name}' can no longer resume from step {run.checkpoint_step}")
    return Removal(label=label, rows=rows, paths=existing([run.run_dir / "output" / key]), refusals=refusals)


def reward_version_users(version_ids: set[int]) -> list[str]:
    """The runs and jobs that pin one of ``version_ids`` (as a reward, a tool or the environment), for
    rewards.services.VERSION_USERS."""
    found = []
    for run in Run.objects.select_related("owner").only("name", "owner__username", "rewards", "tools", "environment"):
        pinned = [*(run.rewards or []), *(run.tools or []), run.environment or {}]
        if any(isinstance(p, dict) and p.get("version_id") in version_ids for p in pinned):
            found.append(f"run '{run.name}' of {_whose(run)}")
    for job in RejectionJob.objects.select_related("owner").only("name", "owner__username", "rewards"):
        if any(isinstance(p, dict) and p.get("version_id") in version_ids for p in job.rewards or []):
            found.append(f"rejection-sampling job '{job.name}' of {_whose(job)}")
    return found
