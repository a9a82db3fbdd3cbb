"""Writes of the evaluations capability: store what the evaluation program (workers.training.evaluate) reports, and validate
and queue standalone evaluation jobs (a worker runs them: workers.jobs.run_evaluation)."""

from __future__ import annotations

import re
from dataclasses import asdict

from django.db import transaction
from django.utils import timezone
from grpo_web_protocol.config import EvalFields
from grpo_web_protocol.scoring import criterion

from grpo_web import queues
from runs.jobs import job_cancel, jobs_redispatch
from runs.models import DatasetVersion, EvalSample, Evaluation, Run
from runs.paths import model_access_at_start, model_problems, resolve_model
from runs.text import as_text, prompt_key

EVAL_SPLITS = {"eval": "the eval split", "all": "every row"}
BASE_LABEL = "base model"  # the label of a standalone evaluation of its run's base model


class EvaluationRefused(Exception):
    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def eval_source(version: DatasetVersion) -> str:
    """The data source in the metric names (verl's ``val-core/<data source>/...``): the dataset's name, slugged."""
    return re.sub(r"[^a-z0-9]+", "_", version.dataset.name.lower()).strip("_") or "eval"


def eval_settings(run: Run) -> EvalFields:
    return EvalFields(**(run.evaluation or {}))


def eval_max_new_tokens(run: Run, settings: dict) -> int:
    """The tokens an evaluation of ``run`` generates per completion: its own setting, else the run's
    max_completion_length (what the periodic evaluation uses too: workers.training.evaluate)."""
    return int(settings.get("eval_max_new_tokens") or run.config.get("max_completion_length") or 16)


# --- storing results ----------------------------------------------------------------------------------------------


def store_eval_event(evaluation: Evaluation, event: dict) -> None:
    """An ``"eval"`` event's figures and completions onto ``evaluation``; samples already stored are kept (a log
    read twice stores nothing twice)."""
    evaluation.k, evaluation.solved_by, evaluation.threshold = event["k"], event["solved_by"], event["threshold"]
    evaluation.prompts, evaluation.metrics, evaluation.seconds = event["prompts"], event["metrics"], event["seconds"]
    evaluation.generated_with = event.get("generator", "")
    evaluation.status, evaluation.finished_at = Evaluation.Status.COMPLETED, timezone.now()
    evaluation.save()
    keys: dict[str, str] = {}
    samples = []
    for row in event["rows"]:
        prompt = as_text(row["prompt"])
        samples.append(
            EvalSample(
                evaluation=evaluation,
                prompt_index=row["prompt_index"],
                sample=row["sample"],
                greedy=row["greedy"],
                prompt=prompt,
                prompt_key=keys.get(prompt) or keys.setdefault(prompt, prompt_key(prompt)),
                completion=as_text(row["completion"]),
                rewards=row["rewards"],
                reward=row["reward"],
                correct=row["correct"],
                answer=(row["answer"] or "")[:200].replace("\x00", ""),
                length=row["length"],
                truncated=row["truncated"],
                columns=row.get("columns") or {},
            )
        )
    EvalSample.objects.bulk_create(samples, batch_size=2000, ignore_conflicts=True)


def store_periodic(run: Run, event: dict) -> Evaluation:
    """A periodic evaluation from the training run's event log (one per evaluated step); an imported one (verl's
    validation dump) names the file it was read from in ``imported_from``."""
    evaluation, _ = Evaluation.objects.get_or_create(
        run=run,
        kind=Evaluation.Kind.PERIODIC,
        step=event["step"],
        defaults={
            "label": event.get("label") or f"step {event['step']}",
            "model": run.model,
            "dataset_version_id": run.dataset_version_id,
            "settings": run.evaluation,
            "imported_from": (event.get("imported_from") or "")[:500],
        },
    )
    store_eval_event(evaluation, event)
    return evaluation


# --- standalone jobs ----------------------------------------------------------------------------------------------


def model_choices(run: Run) -> list[tuple[str, str]]:
    """What a standalone evaluation can load for this run: (value, label). The base model; the final model and each
    checkpoint still on disk; 'path' for any other model folder."""
    out = run.run_dir / "output"
    choices = [("base", f"base model ({run.model or 'unknown: ' + run.unknown_reason})")]
    if (out / "final" / "config.json").is_file():
        choices.append(("final", "final model (after training)"))
    # a LoRA run's checkpoints hold the adapter alone: transformers loads it onto its base model (PEFT)
    checkpoints = sorted(
        (p for p in out.glob("checkpoint-*") if (p / "config.json").is_file() or (p / "adapter_config.json").is_file()),
        key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else 0,
    )
    choices += [(p.name, p.name) for p in checkpoints]
    choices.append(("path", "another model (a folder or hub id)"))
    return choices


def _resolve(run: Run, choice: str, path: str, user) -> tuple[str, str, int | None]:
    """(model to load, label, step) for a model choice; another model must be one ``user`` may read."""
    valid = dict(model_choices(run))
    if choice not in valid:
        raise EvaluationRefused([f"model: '{choice}' is not available for this run (choose one of {', '.join(valid)})"])
    if choice == "base":
        return resolve_model(run.model), BASE_LABEL, 0
    if choice == "final":
        return str(run.run_dir / "output" / "final"), "final model", run.step
    if choice.startswith("checkpoint-"):
        return str(run.run_dir / "output" / choice), choice, int(choice.split("-")[-1])
    path = path.strip()
    problems = model_problems(path, user=user) if path else ["model path: give a model folder or a hub id"]
    if problems:
        raise EvaluationRefused(problems)
    return resolve_model(path), path, None


def evaluation_create(
    *,
    run: Run,
    user,
    model: str,
    model_path: str = "",
    dataset_version: DatasetVersion,
    split: str = "eval",
    settings: EvalFields | None = None,
    generator: str = Evaluation.Generator.TRANSFORMERS,
) -> Evaluation:
    """Validate and queue ``user``'s standalone evaluation of one model of ``run`` (scored by the run's reward
    functions); a model other than the run's own must be one ``user`` may read (runs.paths.model_problems)."""
    settings = settings or eval_settings(run)
    errors = []
    if split not in EVAL_SPLITS:
        errors.append(f"split: give one of {', '.join(EVAL_SPLITS)}")
    elif split == "eval" and not dataset_version.eval_rows:
        errors.append(
            f"dataset: {dataset_version} has no eval split; choose 'every row' or map an eval split "
            f"on the dataset's mapping page"
        )
    if generator not in Evaluation.Generator.values:
        errors.append(f"generator: give one of {', '.join(Evaluation.Generator.values)}")
    if settings.eval_num_samples < 1:
        errors.append("eval_num_samples: must be at least 1")
    if settings.eval_max_prompts < 0:
        errors.append("eval_max_prompts: must be 0 (all) or more")
    if not run.rewards:  # an SFT run may name none: nothing would score the completions
        errors.append(
            "rewards: this run names no reward function to score an evaluation; clone it with the rewards that should"
        )
    try:
        criterion(settings.eval_solved_by, run.reward_names)
    except ValueError as exc:
        errors.append(str(exc))
    try:
        loaded, label, step = _resolve(run, model, model_path, user)
    except EvaluationRefused as exc:
        errors += exc.errors
    if errors:
        raise EvaluationRefused(errors)
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            run=run,
            kind=Evaluation.Kind.STANDALONE,
            step=step,
            label=label,
            model=loaded,
            dataset_version=dataset_version,
            split=split,
            settings=asdict(settings),
            generator=generator,
            requested_by=user,
        )
        transaction.on_commit(lambda: _enqueue(evaluation))
    return evaluation


def evaluation_refused_at_start(evaluation: Evaluation) -> str:
    """Why a queued standalone evaluation may not load its model now that it starts; "" when it may. What
    evaluation_create allowed is asked again, since a run or model shared when it was queued may have been unshared
    (or deleted) since: the one who queued it may still change the run, another model they named is still theirs to
    read, and the run's base model is still its owner's to load (as a resumed run's would be)."""
    run = evaluation.run
    user = evaluation.requested_by or run.owner  # an evaluation queued before requested_by was kept: the run's owner
    if not Run.objects.visible_to(user, write=True).filter(pk=run.pk).exists():
        return (
            "run: not found or not yours to evaluate (checked again as it started: a run shared with you when "
            "this was queued may have been unshared since)"
        )
    if evaluation.step is None:  # another model, named by whoever queued it (_resolve)
        return model_access_at_start(evaluation.model, user=user)
    if evaluation.label == BASE_LABEL and run.model:
        return model_access_at_start(run.model, user=run.owner)
    return ""  # the run's own final model or a checkpoint: its folder is the run's, checked above


def evaluation_cancel(*, evaluation: Evaluation) -> Evaluation:
    """A queued or running standalone evaluation: cancelled now; its worker stops the evaluation process within a
    second (workers.jobs.run_eval_program)."""
    return job_cancel(job=evaluation)


def evaluation_redispatch(*, grace_seconds: float = 30) -> list[Evaluation]:
    """Queue again every standalone evaluation the database holds as queued whose message the broker lost (see
    runs.lifecycle.services.run_redispatch); its claim is idempotent too."""
    standalone = Evaluation.objects.filter(kind=Evaluation.Kind.STANDALONE).select_related("run")
    return jobs_redispatch(standalone, task=queues.EVALUATE, enqueue=_enqueue, grace_seconds=grace_seconds)


def _enqueue(evaluation: Evaluation) -> None:
    queues.enqueue(queues.EVALUATE, args=[evaluation.pk], queue=queues.training_queue(evaluation.run.requested_gpus))
