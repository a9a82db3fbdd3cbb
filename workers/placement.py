"""Where a run's work goes on this worker: its sandbox slots (a Celery pool process's block, or a Ray attempt's range
held in the database), its GPUs (training's and the vLLM server's), and TRL's vLLM server on its own GPU."""

from __future__ import annotations

import os
import socket
import subprocess

from django.conf import settings
from django.db import IntegrityError, transaction

from rewards.sandbox.host import MAX_SLOT
from runs.models import Run
from runs.paths import resolve_model
from runs.rollouts.ingest import Fenced
from workers.processes import die_with_parent, program_python, training_env, wait_until_answers
from workers.registry import detect_gpus

SLOTS_PER_PROCESS = 128


def slot_base() -> int:
    """Sandbox slots of this worker process's runs: 100 + 128 per Celery pool process, clear of the sandbox queue's;
    a run's ranks and reward functions share the 128 (workers.training.rewarding.rank_slot)."""
    from billiard.process import current_process

    return 100 + SLOTS_PER_PROCESS * (getattr(current_process(), "index", 0) or 0)


# Ray runs' sandbox slots: from 2200 (clear of the reward tests' 1.., the contract checks' 50.., the Celery pool processes' runs at 100 + 128 x
# index and the replays' at 2000 + 16 x index) to the sandbox's last slot, in ranges of 128: 14 live Ray runs at once
RAY_SLOT_FIRST = 2200
RAY_SLOT_RANGES = range(RAY_SLOT_FIRST, MAX_SLOT + 2 - SLOTS_PER_PROCESS, SLOTS_PER_PROCESS)


class NoSlots(RuntimeError):
    pass


def ray_slot_base(run: Run) -> int:
    """The first sandbox slot (uid 61000 + slot) of a Ray run's attempt. Its sandboxes start on the cluster's nodes,
    beside other Ray runs' submitted by any worker, so the range is allocated in the database: the lowest range no
    other live attempt holds, kept unique among live attempts (lease set) by a constraint, so two supervisors that
    pick the same range at once cannot both keep it. Raises NoSlots when every range is held."""
    held = set(
        Run.objects.filter(lease__isnull=False, ray_slot_base__isnull=False)
        .exclude(pk=run.pk)
        .values_list("ray_slot_base", flat=True)
    )
    for base in RAY_SLOT_RANGES:
        if base in held:
            continue
        try:
            with transaction.atomic():
                kept = Run.objects.filter(pk=run.pk, lease=run.lease).update(ray_slot_base=base)
        except IntegrityError:  # another attempt took it since the read above
            continue
        if not kept:
            raise Fenced(f"run {run.pk}: the attempt was taken from this supervisor")
        run.ray_slot_base = base
        return base
    raise NoSlots(
        f"every sandbox slot range for Ray runs is held: {len(RAY_SLOT_RANGES)} Ray runs are running; "
        f"resume this one when one ends"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def visible_gpus() -> list[str]:
    """The GPUs this worker may use: CUDA_VISIBLE_DEVICES when set, else every GPU nvidia-smi lists."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [g for g in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if g.strip()]
    return [str(g["index"]) for g in detect_gpus()]


def gpu_plan(run: Run, visible: list[str]) -> tuple[list[str], str | None]:
    """(the training processes' GPUs, the vLLM server's GPU or None): the first ``requested_gpus`` visible GPUs
    train; in server mode the next one serves, so the server never shares a GPU with training rank 0."""
    if run.requested_gpus <= 0 or not visible:
        return [], None  # a CPU worker that took a GPU run's queue (a test, a routing by hand) trains on its CPU
    if len(visible) < run.gpus_needed:
        raise RuntimeError(
            f"this worker sees {len(visible)} GPU(s) ({','.join(visible) or 'none'}) but the run "
            f"needs {run.gpus_needed}" + (" (one of them for the vLLM server)" if run.vllm_server else "")
        )
    train = visible[: run.requested_gpus]
    return train, visible[run.requested_gpus] if run.vllm_server else None


def start_vllm_server(run: Run, log_file, device: str | None) -> tuple[subprocess.Popen, int]:
    """vllm_mode="server": TRL's vLLM server (``trl vllm-serve``, which runs vLLM's own) on ``device``, a GPU training
    does not see (gpu_plan); with no GPU (``device`` None), in vLLM's CPU build where this worker has it. It answers
    generation there; TRL's weight sync into it is NCCL's, GPU-only (runs.lifecycle.services.vllm_on_cpu_problems)."""
    port = free_port()
    python, in_vllm_cpu = program_python(vllm_on_cpu=device is None)
    env = training_env(vllm_cpu=in_vllm_cpu)
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    proc = subprocess.Popen(
        [python, "-m", "trl.scripts.vllm_serve", "--model", resolve_model(run.model), "--port", str(port)],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # vLLM's engine runs in processes of its own: stop() ends the whole group
        preexec_fn=die_with_parent,
    )
    wait_until_answers(
        proc, f"http://127.0.0.1:{port}/health", settings.GRPO_VLLM_START_TIMEOUT, what="the vLLM server", every=2
    )
    return proc, port
