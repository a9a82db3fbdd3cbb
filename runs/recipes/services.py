"""Writes of the recipes capability: make a recipe (from a template or stages), start it, advance it when a stage
finishes, cancel it, resume it from a failed stage, clone it.

A stage is an ordinary object of another capability: an SFT or GRPO run (runs.lifecycle), a rejection-sampling job
(runs.sampling) or a standalone evaluation (runs.evaluations). Its inputs name a model ("tiny", a folder, a hub id, or
"stage:N": the final model of stage N) and a dataset version (an id, or "stage:N": the dataset stage N saved)."""

from __future__ import annotations

import copy

from django.db import transaction
from django.utils import timezone
from grpo_web_protocol.config import EVAL_FIELDS, EvalFields

from rewards.models import RewardFunction
from runs.access import visible_versions
from runs.evaluations.services import evaluation_cancel, evaluation_create
from runs.lifecycle.demos import DEMO_SFT
from runs.lifecycle.services import run_cancel, run_create, spec_normalized
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.training_config import run_train_config
from runs.models import DatasetVersion, Evaluation, Recipe, RejectionJob, Run
from runs.paths import model_access_problems
from runs.sampling.services import RejectionSettings, rejection_job_cancel, rejection_job_create

KINDS = ("sft", "grpo", "rejection_sample", "eval")
MAKES_MODEL = ("sft", "grpo")

# the recipe's stages train the tiny demo model: the demo's small values (runs.lifecycle.demos), not TRL's defaults
_SFT = DEMO_SFT | {
    # the cold start of 'tiny-sft': 40 steps of 16 left the tiny model answering none of 256 samples right after the
    # GRPO stage; 120 of 32 leaves it right on about 2% of them, so rejection sampling keeps some
    "max_steps": 120,
    "per_device_train_batch_size": 32,
    "save_steps": 60,
}
_GRPO = {
    # TRL's form default (1e-2) undoes a tiny cold start in a few steps: the rejection sampling after it kept nothing
    "learning_rate": 1e-3,
    "max_steps": 8,
    "num_generations": 4,
    "per_device_train_batch_size": 8,
    "max_completion_length": 24,
    "save_steps": 4,
}
_SAMPLE = {
    # a tiny cold-started model answers about 2% right: 64 prompts x 8 samples keep some, 24 x 4 kept none
    "k": 8,
    "threshold": 1.0,
    "solved_by": "accuracy",
    "max_per_prompt": 1,
    "max_prompts": 64,
    "max_new_tokens": 24,
    "mix_rows": 16,
}

# "prompts": the dataset version with the questions; "sft": one with worked answers (a completion column).
TEMPLATES = {
    "R1": [
        {"kind": "sft", "name": "cold-start SFT", "model": "tiny", "dataset": "input:sft", "config": _SFT},
        {
            "kind": "grpo",
            "name": "reasoning GRPO",
            "model": "stage:1",
            "dataset": "input:prompts",
            "rewards": ["accuracy", "think_format"],
            "config": _GRPO,
        },
        {
            "kind": "rejection_sample",
            "name": "rejection sampling",
            "model": "stage:2",
            "dataset": "input:prompts",
            "rewards": ["accuracy"],
            "settings": _SAMPLE,
            "mix": "input:sft",
        },
        {"kind": "sft", "name": "second SFT", "model": "tiny", "dataset": "stage:3", "config": _SFT},
        {
            "kind": "grpo",
            "name": "final GRPO",
            "model": "stage:4",
            "dataset": "input:prompts",
            "rewards": ["accuracy", "think_format"],
            "config": _GRPO,
        },
    ],
    "R1-Zero": [
        {
            "kind": "grpo",
            "name": "GRPO from the base model",
            "model": "tiny",
            "dataset": "input:prompts",
            "rewards": ["accuracy", "think_format"],
            "config": _GRPO,
        },
    ],
    "distill": [
        {
            "kind": "rejection_sample",
            "name": "sample the teacher",
            "model": "tiny-sft",
            "dataset": "input:prompts",
            "rewards": ["accuracy"],
            "settings": _SAMPLE,
            "mix": "input:sft",
        },
        {"kind": "sft", "name": "SFT the student", "model": "tiny", "dataset": "stage:1", "config": _SFT},
    ],
}


class RecipeRefused(Exception):
    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def _ref(value) -> int | None:
    if isinstance(value, str) and value.startswith("stage:") and value[6:].isdigit():
        return int(value[6:])
    return None


MAX_STAGES = 32  # the R1 recipe has five; 20,000 stages took minutes to make and made the recipe pages crawl


def recipe_problems(stages: list[dict], owner) -> list[str]:
    """Each problem names its stage: an unknown kind, an input naming a later stage or one that makes no such output,
    a dataset version or a model the owner cannot use (a later stage's "stage:N" is the owner's own run's output)."""
    errors = []
    if not stages:
        return ["stages: give at least one stage"]
    if len(stages) > MAX_STAGES:
        return [f"stages: a recipe has at most {MAX_STAGES} stages; this one has {len(stages)}"]
    versions = visible_versions(owner)
    for n, stage in enumerate(stages, start=1):
        if not isinstance(stage, dict):
            errors.append(f"stage {n}: give a mapping of kind, name, model, dataset, ...")
            continue
        kind, before = stage.get("kind"), len(errors)
        if kind not in KINDS:
            errors.append(f"stage {n}: kind must be one of {', '.join(KINDS)}")
            continue
        for key, wants in (("model", MAKES_MODEL), ("dataset", ("rejection_sample",)), ("mix", ("rejection_sample",))):
            value = stage.get(key)
            ref = _ref(value)
            if ref is not None:
                if not 1 <= ref < n:
                    errors.append(f"stage {n}: {key} names stage {ref}, which does not come before it")
                elif stages[ref - 1].get("kind") not in wants:
                    errors.append(
                        f"stage {n}: {key} names stage {ref} ({stages[ref - 1].get('kind')}), which makes no {key}"
                    )
            elif (
                key != "model"
                and value is not None
                and (isinstance(value, bool) or not isinstance(value, int) or not versions.filter(pk=value).exists())
            ):
                errors.append(f"stage {n}: {key}: you have no dataset version {value!r} (give its id, or stage:N)")
            elif key == "model" and not isinstance(value, str):
                errors.append(f"stage {n}: model: give a model name, folder or hub id, or stage:N")
            elif key == "model":  # one the owner may read; whether it loads is the stage's run or job to check
                errors += [f"stage {n}: {problem}" for problem in model_access_problems(value, user=owner)]
        if kind != "eval" and stage.get("dataset") is None:
            errors.append(f"stage {n}: dataset: give a dataset version id, or stage:N")
        elif kind in MAKES_MODEL and len(errors) == before:  # its inputs are sound: check what it would train
            errors += [f"stage {n}: {problem}" for problem in stage_config_problems(stages, n, owner)]
        if kind == "eval" and _ref(stage.get("model")) is None:
            errors.append(f"stage {n}: an eval stage evaluates the model of an earlier sft or grpo stage (stage:N)")
        if kind == "eval" and stage.get("settings") is not None:
            settings = stage["settings"]
            unknown = sorted(set(settings) - set(EVAL_FIELDS)) if isinstance(settings, dict) else None
            if unknown is None or unknown:
                errors.append(
                    f"stage {n}: settings: give evaluation settings by name ({', '.join(EVAL_FIELDS)})"
                    + (f"; not {', '.join(map(str, unknown))}" if unknown else "")
                )
    return errors


def stage_config_problems(stages: list[dict], n: int, owner) -> list[str]:
    """What the run of training stage ``n`` (1-based) would be refused for in its config, checked when the recipe is
    made, not when the stage starts: its fields, as the training program and TRL's config take them
    (TrainConfig.validate, run_create's own check), and its reward names. A stage:N input is not made yet: the
    check reads it as what it comes from (a model: the base model stage N trains; a dataset: the version stage N
    samples from), which is all a config check needs of it."""
    stage = stages[n - 1]
    config = stage.get("config") or {}
    if not isinstance(config, dict):
        return ["config: give the run's fields as a mapping"]
    evaluation = stage.get("evaluation") or {}
    if not isinstance(evaluation, dict):
        return ["evaluation: give evaluation settings as a mapping"]
    try:
        rewards = pinned_rewards(owner, list(stage.get("rewards") or []))
    except RecipeRefused as exc:
        return exc.errors
    except TypeError:
        return ["rewards: give reward function names"]
    version = DatasetVersion.objects.filter(pk=_source(stages, n, "dataset")).first()
    if version is None:
        return []  # named above: no such dataset version
    spec = RunSpec(
        name=stage.get("name") or stage["kind"],
        model=str(_source(stages, n, "model") or ""),
        kind=stage["kind"],
        dataset_version=version,
        rewards=rewards,
        config=dict(config),
        evaluation=dict(evaluation),
    )
    try:
        return run_train_config(spec_normalized(spec).as_run(), slot_base=0, write_files=False).validate()
    except (TypeError, ValueError) as exc:  # a field the stage's kind does not have, a value of the wrong type
        return [f"config: {exc}"]


def _source(stages: list[dict], n: int, key: str):
    """Stage ``n``'s model or dataset, followed back through stage:N references to the literal it comes from."""
    value = stages[n - 1].get(key)
    seen = set()
    while (ref := _ref(value)) is not None and ref not in seen and 1 <= ref < n:
        seen.add(ref)
        value = stages[ref - 1].get("model" if key == "model" else "dataset")
        n = ref
    return None if _ref(value) is not None else value


def recipe_from_template(
    *, owner, name: str, template: str, prompts: DatasetVersion, sft: DatasetVersion | None = None
) -> Recipe:
    stages = copy.deepcopy(TEMPLATES[template])
    inputs = {"input:prompts": prompts.pk, "input:sft": sft.pk if sft else None}
    for stage in stages:
        for key in ("dataset", "mix"):
            if stage.get(key) in inputs:
                stage[key] = inputs[stage[key]]
                if stage[key] is None:
                    raise RecipeRefused(
                        [f"{stage['name']}: this template needs a dataset with worked answers (a completion column)"]
                    )
    return recipe_create(owner=owner, name=name, stages=stages)


def recipe_create(*, owner, name: str, stages: list[dict], parent: Recipe | None = None) -> Recipe:
    errors = recipe_problems(stages, owner)
    if errors:
        raise RecipeRefused(errors)
    return Recipe.objects.create(owner=owner, name=name, stages=stages, parent=parent, outputs=[{} for _ in stages])


def recipe_clone(*, recipe: Recipe, name: str = "", stages: list[dict] | None = None) -> Recipe:
    return recipe_create(
        owner=recipe.owner,
        name=name or f"{recipe.name} (clone)",
        stages=stages if stages is not None else recipe.stages,
        parent=recipe,
    )


def recipe_start(*, recipe: Recipe) -> Recipe:
    with transaction.atomic():
        recipe = Recipe.objects.select_for_update().get(pk=recipe.pk)
        if recipe.status != Recipe.Status.DRAFT:
            raise RecipeRefused(["only a recipe that has not started can be started"])
        recipe.status, recipe.current = Recipe.Status.RUNNING, 0
        recipe.save(update_fields=["status", "current"])
        _launch(recipe)
    return recipe


def recipe_resume(*, recipe: Recipe) -> Recipe:
    """A failed or cancelled recipe starts its stopped stage again (a new run or job); earlier outputs are kept."""
    with transaction.atomic():
        recipe = Recipe.objects.select_for_update().get(pk=recipe.pk)
        if recipe.status not in (Recipe.Status.FAILED, Recipe.Status.CANCELLED):
            raise RecipeRefused(["only a failed or cancelled recipe can be resumed"])
        recipe.status, recipe.error, recipe.finished_at = Recipe.Status.RUNNING, "", None
        recipe.save(update_fields=["status", "error", "finished_at"])
        _launch(recipe)
    return recipe


def recipe_cancel(*, recipe: Recipe) -> Recipe:
    with transaction.atomic():
        recipe = Recipe.objects.select_for_update().get(pk=recipe.pk)
        if recipe.status != Recipe.Status.RUNNING:
            return recipe
        output = recipe.outputs[recipe.current]
        # whatever the stage runs is stopped: a run (its supervisor stops the trainer), a rejection-sampling job or
        # an evaluation (their worker stops the program)
        if output.get("run"):
            run_cancel(run=Run.objects.get(pk=output["run"]))
        elif output.get("job"):
            rejection_job_cancel(job=RejectionJob.objects.get(pk=output["job"]))
        elif output.get("evaluation"):
            evaluation_cancel(evaluation=Evaluation.objects.get(pk=output["evaluation"]))
        recipe.outputs[recipe.current] = {**output, "status": "cancelled"}
        recipe.status, recipe.finished_at = Recipe.Status.CANCELLED, timezone.now()
        recipe.save(update_fields=["outputs", "status", "finished_at"])
    return recipe


def pinned_rewards(owner, names: list[str]) -> list[dict]:
    out = []
    for name in names:
        rf = RewardFunction.objects.visible_to(owner).filter(name=name, versions__isnull=False).order_by("pk").first()
        if rf is None:
            raise RecipeRefused([f"rewards: you have no reward function {name!r}"])
        out.append(
            {"name": rf.name, "weight": 1.0, "version_id": rf.latest_version.pk, "version": rf.latest_version.number}
        )
    return out


def _input(recipe: Recipe, value, key: str):
    """A stage's input: the model (a name, or the final model of stage N), or a dataset version (an id, or the one
    stage N saved)."""
    ref = _ref(value)
    if key == "model":
        return recipe.outputs[ref - 1]["model"] if ref else value
    if ref:
        value = recipe.outputs[ref - 1]["dataset_version"]
    return DatasetVersion.objects.get(pk=value) if value is not None else None


def _launch(recipe: Recipe) -> None:
    """Create the current stage's object; a refusal fails the recipe at that stage."""
    n = recipe.current
    stage = recipe.stages[n]
    owner, name = recipe.owner, f"{recipe.name} · {n + 1}. {stage.get('name') or stage['kind']}"
    output: dict = {"status": "running"}
    try:
        model = _input(recipe, stage.get("model"), "model")
        if stage["kind"] in MAKES_MODEL:
            config = dict(stage.get("config") or {})
            spec = RunSpec(
                name=name,
                model=model,
                kind=stage["kind"],
                dataset_version=_input(recipe, stage["dataset"], "dataset"),
                rewards=pinned_rewards(owner, stage.get("rewards") or []),
                config=config,
                evaluation=stage.get("evaluation") or {},
            )
            run = run_create(owner=owner, spec=spec, queue_anyway=True, check_rewards=False)
            output["run"] = run.pk
        elif stage["kind"] == "rejection_sample":
            job = rejection_job_create(
                owner=owner,
                name=name,
                model=model,
                dataset_version=_input(recipe, stage["dataset"], "dataset"),
                rewards=pinned_rewards(owner, stage.get("rewards") or []),
                settings=RejectionSettings(**(stage.get("settings") or {})),
                split=stage.get("split", "all"),
                mix_version=_input(recipe, stage.get("mix"), "dataset"),
            )
            output["job"] = job.pk
        else:  # eval: the final model of an earlier stage's run, on a dataset version's eval split
            source = Run.objects.get(pk=recipe.outputs[_ref(stage["model"]) - 1]["run"])
            version = _input(recipe, stage.get("dataset"), "dataset") or source.dataset_version
            evaluation = evaluation_create(
                run=source,
                user=owner,
                model="final",
                dataset_version=version,
                split=stage.get("split", "eval"),
                settings=EvalFields(**stage["settings"]) if stage.get("settings") else None,
            )
            output["evaluation"], output["evaluated_run"] = evaluation.pk, source.pk
    except Exception as exc:  # RunRefused, JobRefused, EvaluationRefused, RecipeRefused
        errors = getattr(exc, "errors", None) or [str(exc)]
        recipe.outputs[n] = {"status": "failed", "error": "; ".join(errors)}
        recipe.status, recipe.error, recipe.finished_at = (
            Recipe.Status.FAILED,
            f"stage {n + 1}: {'; '.join(errors)}",
            timezone.now(),
        )
        recipe.save(update_fields=["outputs", "status", "error", "finished_at"])
        return
    recipe.outputs[n] = output
    recipe.save(update_fields=["outputs"])


def _stage_state(output: dict) -> tuple[str, dict, str]:
    """(status, outputs to record, error) of a stage's object."""
    if output.get("run"):
        run = Run.objects.get(pk=output["run"])
        last = run.step_metrics.order_by("-step").values_list("metrics", flat=True).first() or {}
        figures = {k: last[k] for k in ("reward", "loss", "mean_token_accuracy") if last.get(k) is not None}
        return run.status, {"model": str(run.run_dir / "output" / "final"), "figures": figures}, run.error
    if output.get("job"):
        job = RejectionJob.objects.get(pk=output["job"])
        figures = {k: job.stats.get(k) for k in ("kept", "kept_share", "mixed_in")} if job.stats else {}
        produced = {"dataset_version": job.output_version_id, "figures": figures}
        if job.status == RejectionJob.Status.COMPLETED and job.stats.get("kept") == 0:
            # its dataset holds only the mixed-in rows: the stages after it would learn nothing the model sampled
            return "failed", produced, nothing_kept_error(job)
        return job.status, produced, job.error
    if output.get("evaluation"):
        evaluation = Evaluation.objects.get(pk=output["evaluation"])
        return evaluation.status, {"figures": dict(evaluation.metrics)}, evaluation.error
    return output.get("status", "failed"), {}, output.get("error", "")


def nothing_kept_error(job: RejectionJob) -> str:
    """Why a recipe stops at a rejection-sampling stage that kept no sample, and what to change."""
    stats, settings = job.stats, job.settings
    return (
        f"rejection sampling kept 0 of {stats.get('samples', 0)} samples: none reached "
        f"{stats.get('solved_by') or 'the reward'} ≥ {settings.get('threshold', 1.0):g}, so its dataset holds only "
        f"the {stats.get('mixed_in', 0)} mixed-in rows. Lower the threshold, sample more (k), or train the model "
        f"before it longer, then resume"
    )


def recipe_advance(*, recipe_id: int) -> Recipe | None:
    """Look at the running stage: completed, record its outputs and start the next (or finish the recipe); failed or
    cancelled, stop the recipe there, resumable. Safe to call any time, from anywhere, any number of times."""
    with transaction.atomic():
        recipe = Recipe.objects.select_for_update().filter(pk=recipe_id, status=Recipe.Status.RUNNING).first()
        if recipe is None:
            return None
        while recipe.status == Recipe.Status.RUNNING:
            output = recipe.outputs[recipe.current]
            status, produced, error = _stage_state(output)
            if status not in ("completed", "failed", "cancelled"):
                break
            recipe.outputs[recipe.current] = {**output, **produced, "status": status}
            if status != "completed":
                recipe.status, recipe.finished_at = Recipe.Status.FAILED, timezone.now()
                recipe.error = f"stage {recipe.current + 1} {status}: {error}".strip()
            elif recipe.current + 1 == len(recipe.stages):
                recipe.status, recipe.finished_at = Recipe.Status.COMPLETED, timezone.now()
            else:
                recipe.current += 1
                recipe.save(update_fields=["outputs", "current"])
                _launch(recipe)
                continue
            recipe.save(update_fields=["outputs", "status", "error", "finished_at", "current"])
        return recipe


def recipes_advance() -> None:
    """Every running recipe, one step further where its stage has finished (the worker calls this when a run or job
    ends, and on every heartbeat)."""
    for pk in Recipe.objects.filter(status=Recipe.Status.RUNNING).values_list("pk", flat=True):
        recipe_advance(recipe_id=pk)
