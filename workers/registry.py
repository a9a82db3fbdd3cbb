"""Workers announce themselves when they start (host, GPUs, vLLM) and keep a heartbeat; each heartbeat also runs the
reaper, so a run whose worker died is marked failed within GRPO_HEARTBEAT_TIMEOUT plus one beat, and the dispatcher,
which queues again the work the database holds as queued but the broker lost. A dead embedded Redis is started
again on the next beat."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import socket
import subprocess
import threading

from django.db import close_old_connections
from django.utils import timezone

from grpo_web.embedded import ensure_configured_redis
from grpo_web.queues import claim_turn
from runs.attach.services import attached_run_reap_lost
from runs.evaluations.services import evaluation_redispatch
from runs.lifecycle.services import run_reap_stale, run_redispatch
from runs.models import Worker
from runs.recipes.services import recipes_advance
from runs.sampling.services import rejection_job_redispatch
from workers.processes import vllm_cpu_python

log = logging.getLogger(__name__)
BEAT_SECONDS = int(os.environ.get("GRPO_WORKER_BEAT", "15"))


def detect_gpus() -> list[dict]:
    """GPUs as nvidia-smi lists them (no torch import in the worker's main process)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        index, name, memory = [part.strip() for part in line.split(",")]
        gpus.append({"index": int(index), "name": name, "memory_mb": int(float(memory))})
    return gpus


def vllm_installed() -> bool:
    """vLLM is importable here, or this worker was given vLLM's CPU environment (GRPO_VLLM_CPU_PYTHON)."""
    return importlib.util.find_spec("vllm") is not None or vllm_cpu_python() is not None


def announce(name: str, queues: list[str]) -> None:
    now = timezone.now()
    Worker.objects.update_or_create(
        name=name,
        defaults={
            "hostname": socket.gethostname(),
            "queues": queues,
            "gpus": detect_gpus(),
            "vllm": vllm_installed(),
            "started_at": now,
            "last_seen": now,
        },
    )
    dispatch_lost_work()


def dispatch_lost_work() -> None:
    """Runs, evaluations and rejection-sampling jobs queued in the database whose message the broker no longer has:
    sent again (once per beat period across all workers)."""
    if not claim_turn("dispatch", max(1, BEAT_SECONDS - 1)):
        return
    for run in run_redispatch():
        log.warning("run %s was queued but the broker had lost it: sent again", run.pk)
    for evaluation in evaluation_redispatch():
        log.warning("evaluation %s was queued but the broker had lost it: sent again", evaluation.pk)
    for job in rejection_job_redispatch():
        log.warning("rejection-sampling job %s was queued but the broker had lost it: sent again", job.pk)


def beat(name: str, queues: list[str]) -> None:
    ensure_configured_redis()  # the embedded Redis, if it died, is started again (with its append-only file)
    if not Worker.objects.filter(name=name).update(last_seen=timezone.now()):
        announce(name, queues)  # the row went away (an admin cleaned up): say who we are again
    for run in run_reap_stale():
        log.warning("reaped run %s: %s", run.pk, run.error)
    for run in attached_run_reap_lost():
        log.warning("attached run %s: %s", run.pk, run.error)
    dispatch_lost_work()

    recipes_advance()  # a stage that ended while no supervisor was there to say so


def start_heartbeat(name: str, queues: list[str], stop: threading.Event) -> threading.Thread:
    def loop():
        while not stop.wait(BEAT_SECONDS):
            try:
                beat(name, queues)
            except Exception:  # the database may be briefly away; the next beat tries again
                log.exception("worker heartbeat failed")
            finally:
                close_old_connections()

    thread = threading.Thread(target=loop, name="grpo-heartbeat", daemon=True)
    thread.start()
    return thread
