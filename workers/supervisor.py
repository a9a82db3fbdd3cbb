"""The Django side of a run: start the training program as its own process, ingest its event log, keep the run's
status true. The training process never imports Django; this module never imports torch."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction

from rewards.selectors import reward_specs
from runs.ingest import ingest_log
from runs.live import publish
from runs.models import Run
from workers.config import GRPOFields, RewardSpec, TrainConfig

log = logging.getLogger(__name__)

# What the training process may see of our environment: nothing secret (no DATABASE_URL, SECRET_KEY, REDIS_URL).
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
              "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "VIRTUAL_ENV", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
POLL_SECONDS = 0.25


def resolve_model(model: str) -> str:
    return str(settings.GRPO_TINY_MODEL_DIR) if model == "tiny" else model


def train_config(run: Run) -> TrainConfig:
    return TrainConfig(
        model=resolve_model(run.model),
        dataset_path=run.dataset_version.write_training_jsonl(run.run_dir / "train.jsonl"),
        output_dir=str(run.run_dir / "output"),
        event_log=str(run.run_dir / "events.jsonl"),
        rewards=[RewardSpec(**r) for r in reward_specs(run.rewards)],
        grpo=GRPOFields(**run.config),
        max_reward_faults=settings.GRPO_REWARD_MAX_FAULTS,
        allow_weak_sandbox=settings.GRPO_SANDBOX_ALLOW_WEAK,
        sandbox_slot_base=_slot_base(),
    )


def _slot_base() -> int:
    """Sandbox slots of this worker process's runs: 100 + 16 per Celery pool process, clear of the sandbox queue's."""
    from billiard.process import current_process

    return 100 + 16 * (getattr(current_process(), "index", 0) or 0)


def training_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env["PYTHONPATH"] = str(settings.BASE_DIR)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def claim(run_id: int) -> Run | None:
    """Move a queued run to running; None if it is gone or no longer queued (cancelled, or a redelivery)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != Run.Status.QUEUED:
            return None
        run.mark_running()
        return run


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def ingest_and_push(run: Run) -> list[dict]:
    changed, events = ingest_log(run, run.run_dir / "events.jsonl")
    if events:
        publish(run.pk, status=run.status, step=run.step, steps=changed["steps"], rollouts=changed["rollouts"])
    return events


def supervise(run_id: int) -> None:
    run = claim(run_id)
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return
    run.run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run.run_dir / "train_config.json"
    config_path.write_text(train_config(run).to_json())
    log_path = run.run_dir / "train.log"
    publish(run.pk, status=run.status, step=run.step, steps=[], rollouts=0)

    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.train", str(config_path)],
            cwd=settings.BASE_DIR, env=training_env(), stdout=log_file, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    outcome: dict = {}
    try:
        while True:
            exited = proc.poll() is not None  # read the exit status first so the final ingest sees every event
            for event in ingest_and_push(run):
                if event["type"] in ("finished", "failed"):
                    outcome = event
            if exited:
                break
            time.sleep(POLL_SECONDS)
    except Exception as exc:
        # Ingest failed (a bad event, the database went away): stop training rather than train unobserved.
        log.exception("run %s: ingest failed", run.pk)
        _kill(proc)
        run.mark_failed(f"ingest failed: {type(exc).__name__}: {exc}", _log_tail(log_path))
        publish(run.pk, status=run.status, step=run.step, steps=[], rollouts=0)
        return

    if proc.returncode == 0 and outcome.get("type") == "finished":
        run.mark_completed()
    else:
        error = outcome.get("error") or f"the training process exited with code {proc.returncode}"
        run.mark_failed(error, _log_tail(log_path))
    publish(run.pk, status=run.status, step=run.step, steps=[], rollouts=0)


def _kill(proc: subprocess.Popen) -> None:
    """Stop the training process and everything it started (its own session)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()
