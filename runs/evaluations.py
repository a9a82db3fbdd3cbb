"""Evaluations, the Django side: store what workers.evaluate reports, start standalone evaluation jobs and run them
on a worker (the evaluation program is its own process, like training: no Django inside it)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from dataclasses import asdict

from django.db import transaction
from django.utils import timezone

from runs.ingest import _json_safe, _text, prompt_key
from runs.models import DatasetVersion, EvalSample, Evaluation, Run
from workers.config import EvalFields

log = logging.getLogger(__name__)

EVAL_SPLITS = {"eval": "the eval split", "all": "every row"}


class EvaluationRefused(Exception):
    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def eval_source(version: DatasetVersion) -> str:
    """The data source in the metric names (verl's ``val-core/<data source>/...``): the dataset's name, slugged."""
    return re.sub(r"[^a-z0-9]+", "_", version.dataset.name.lower()).strip("_") or "eval"


def eval_settings(run: Run) -> EvalFields:
    return EvalFields(**(run.evaluation or {}))


# --- storing results ----------------------------------------------------------------------------------------------

def store_eval_event(evaluation: Evaluation, event: dict) -> None:
    """An ``"eval"`` event's figures and completions onto ``evaluation``; samples already stored are kept (a log
    read twice stores nothing twice)."""
    evaluation.k, evaluation.solved_by, evaluation.threshold = event["k"], event["solved_by"], event["threshold"]
    evaluation.prompts, evaluation.metrics, evaluation.seconds = event["prompts"], event["metrics"], event["seconds"]
    evaluation.status, evaluation.finished_at = Evaluation.Status.COMPLETED, timezone.now()
    evaluation.save()
    keys: dict[str, str] = {}
    samples = []
    for row in event["rows"]:
        prompt = _text(row["prompt"])
        samples.append(EvalSample(
            evaluation=evaluation, prompt_index=row["prompt_index"], sample=row["sample"], greedy=row["greedy"],
            prompt=prompt, prompt_key=keys.get(prompt) or keys.setdefault(prompt, prompt_key(prompt)),
            completion=_text(row["completion"]), rewards=row["rewards"], reward=row["reward"],
            correct=row["correct"], answer=(row["answer"] or "")[:200].replace("\x00", ""), length=row["length"],
            truncated=row["truncated"], columns=_json_safe(row.get("columns") or {})))
    EvalSample.objects.bulk_create(samples, batch_size=2000, ignore_conflicts=True)


def store_periodic(run: Run, event: dict) -> Evaluation:
    """A periodic evaluation from the training run's event log (one per evaluated step)."""
    evaluation, _ = Evaluation.objects.get_or_create(
        run=run, kind=Evaluation.Kind.PERIODIC, step=event["step"],
        defaults={"label": event.get("label") or f"step {event['step']}", "model": run.model,
                  "dataset_version_id": run.dataset_version_id, "settings": run.evaluation})
    store_eval_event(evaluation, event)
    return evaluation


# --- standalone jobs ----------------------------------------------------------------------------------------------

def model_choices(run: Run) -> list[tuple[str, str]]:
    """What a standalone evaluation can load for this run: (value, label). The base model; the final model and each
    checkpoint still on disk; 'path' for any other model folder."""
    out = run.run_dir / "output"
    choices = [("base", f"base model ({run.model})")]
    if (out / "final" / "config.json").is_file():
        choices.append(("final", "final model (after training)"))
    checkpoints = sorted((p for p in out.glob("checkpoint-*") if (p / "config.json").is_file()),
                         key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else 0)
    choices += [(p.name, p.name) for p in checkpoints]
    choices.append(("path", "another model (a folder or hub id)"))
    return choices


def _resolve(run: Run, choice: str, path: str) -> tuple[str, str, int | None]:
    """(model to load, label, step) for a model choice."""
    from runs.services import model_problems
    from workers.supervisor import resolve_model

    valid = dict(model_choices(run))
    if choice not in valid:
        raise EvaluationRefused([f"model: '{choice}' is not available for this run "
                                 f"(choose one of {', '.join(valid)})"])
    if choice == "base":
        return resolve_model(run.model), "base model", 0
    if choice == "final":
        return str(run.run_dir / "output" / "final"), "final model", run.step
    if choice.startswith("checkpoint-"):
        return str(run.run_dir / "output" / choice), choice, int(choice.split("-")[-1])
    path = path.strip()
    problems = model_problems(path) if path else ["model path: give a model folder or a hub id"]
    if problems:
        raise EvaluationRefused(problems)
    return resolve_model(path), path, None


def evaluation_create(*, run: Run, model: str, model_path: str = "", dataset_version: DatasetVersion,
                      split: str = "eval", settings: EvalFields | None = None) -> Evaluation:
    """Validate and queue a standalone evaluation of one model of ``run`` (scored by the run's reward functions)."""
    settings = settings or eval_settings(run)
    errors = []
    if split not in EVAL_SPLITS:
        errors.append(f"split: give one of {', '.join(EVAL_SPLITS)}")
    elif split == "eval" and not dataset_version.eval_rows:
        errors.append(f"dataset: {dataset_version} has no eval split; choose 'every row' or map an eval split "
                      f"on the dataset's mapping page")
    if settings.eval_num_samples < 1:
        errors.append("eval_num_samples: must be at least 1")
    if settings.eval_max_prompts < 0:
        errors.append("eval_max_prompts: must be 0 (all) or more")
    try:
        from workers.evaluate import criterion

        criterion(settings.eval_solved_by, run.reward_names)
    except ValueError as exc:
        errors.append(str(exc))
    try:
        loaded, label, step = _resolve(run, model, model_path)
    except EvaluationRefused as exc:
        errors += exc.errors
    if errors:
        raise EvaluationRefused(errors)
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            run=run, kind=Evaluation.Kind.STANDALONE, step=step, label=label, model=loaded,
            dataset_version=dataset_version, split=split, settings=asdict(settings))
        transaction.on_commit(lambda: _enqueue(evaluation))
    return evaluation


def _enqueue(evaluation: Evaluation) -> None:
    from grpo_web.embedded import ensure_configured_redis
    from workers.tasks import evaluate, training_queue

    ensure_configured_redis()
    evaluate.apply_async(args=[evaluation.pk], queue=training_queue(evaluation.run.requested_gpus))


def _claim(evaluation_id: int) -> Evaluation | None:
    with transaction.atomic():
        evaluation = (Evaluation.objects.select_for_update().select_related("run", "dataset_version__dataset")
                      .filter(pk=evaluation_id).first())
        if evaluation is None or evaluation.status != Evaluation.Status.QUEUED:
            return None
        evaluation.status = Evaluation.Status.RUNNING
        evaluation.save(update_fields=["status"])
        return evaluation


def run_evaluation(evaluation_id: int) -> None:
    """The worker's side of a standalone evaluation: write the eval prompts, run ``python -m workers.evaluate`` in
    its own process, store its ``"eval"`` event."""
    from rewards.selectors import reward_specs
    from workers.config import RewardSpec
    from workers.evaluate import EvalJob
    from workers.events import read_events
    from workers.supervisor import _die_with_parent, _slot_base, log_tail, push, training_env

    from django.conf import settings as django_settings

    evaluation = _claim(evaluation_id)
    if evaluation is None:
        return
    run = evaluation.run
    folder = evaluation.eval_dir
    folder.mkdir(parents=True, exist_ok=True)
    log_path, event_log = folder / "eval.log", folder / "events.jsonl"
    event_log.unlink(missing_ok=True)
    push(run, evaluations=[evaluation.pk])
    try:
        job = EvalJob(
            model=evaluation.model,
            dataset_path=evaluation.dataset_version.write_training_jsonl(folder / "prompts.jsonl", evaluation.split),
            event_log=str(event_log), rewards=[RewardSpec(**r) for r in reward_specs(run.rewards)],
            evaluation=EvalFields(**evaluation.settings), label=evaluation.label,
            source=eval_source(evaluation.dataset_version),
            max_new_tokens=run.config.get("max_completion_length") or 16, top_p=run.config.get("top_p") or 1.0,
            seed=run.config.get("seed") or 0, max_reward_faults=django_settings.GRPO_REWARD_MAX_FAULTS,
            allow_weak_sandbox=django_settings.GRPO_SANDBOX_ALLOW_WEAK, sandbox_slot_base=_slot_base())
        config_path = folder / "eval_config.json"
        config_path.write_text(job.to_json())
        with open(log_path, "ab") as log_file:
            code = subprocess.call([sys.executable, "-m", "workers.evaluate", str(config_path)],
                                   cwd=django_settings.BASE_DIR, env=training_env(), stdout=log_file,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        events, _ = read_events(event_log)
        result = next((e for e in events if e["type"] == "eval"), None)
        if code == 0 and result is not None:
            with transaction.atomic():
                store_eval_event(evaluation, result)
        else:
            failure = next((e for e in events if e["type"] == "failed"), {})
            raise RuntimeError(failure.get("error") or f"the evaluation process exited with code {code}")
    except Exception as exc:
        log.exception("evaluation %s failed", evaluation.pk)
        evaluation.status, evaluation.error = Evaluation.Status.FAILED, str(exc)[:2000]
        evaluation.log_tail, evaluation.finished_at = log_tail(log_path), timezone.now()
        evaluation.save(update_fields=["status", "error", "log_tail", "finished_at"])
    run.refresh_from_db()
    push(run, evaluations=[evaluation.pk])

