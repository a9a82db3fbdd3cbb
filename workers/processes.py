"""The processes a worker starts (the training and evaluation programs, TRL's vLLM server, the demo's servers): the
environment they may see, dying with their parent, stopping a process group, and waiting until a server answers."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from django.conf import settings

# What the training process may see of our environment: nothing secret (no DATABASE_URL, SECRET_KEY, REDIS_URL).
PASSED_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "VIRTUAL_ENV",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)
# vLLM's own settings (VLLM_CPU_KVCACHE_SPACE, VLLM_CPU_OMP_THREADS_BIND, ...): what its CPU build needs to start
PASSED_ENV_PREFIXES = ("VLLM_",)


# What vLLM's CPU build needs and does not choose for itself: a KV cache it can hold on a small machine (GiB; its
# default, 4, is more than a 2-core CI machine spares beside training). A value the worker's environment sets wins.
VLLM_CPU_DEFAULTS = {"VLLM_CPU_KVCACHE_SPACE": "1"}


def training_env(*, vllm_cpu: bool = False) -> dict[str, str]:
    """The environment of a training or evaluation program; ``vllm_cpu``: it runs in vLLM's CPU environment."""
    env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(PASSED_ENV_PREFIXES)}
    # the checkout, the attach client's package (grpo_web_attach: the training program captures with it) and the
    # protocol (grpo_web_protocol), so a program finds them in an environment that did not install them (vLLM's CPU
    # build, a Ray node's python)
    base = Path(settings.BASE_DIR)
    env["PYTHONPATH"] = os.pathsep.join((str(base), str(base / "attach"), str(base / "protocol")))
    env["PYTHONUNBUFFERED"] = "1"
    if vllm_cpu:
        env = {**VLLM_CPU_DEFAULTS, **env}
        env.pop("VIRTUAL_ENV", None)  # the main environment's: the CPU build's python finds its own
    return env


def vllm_cpu_python() -> str | None:
    """The python of vLLM's CPU environment this worker was given (GRPO_VLLM_CPU_PYTHON), when it is there."""
    path = settings.GRPO_VLLM_CPU_PYTHON
    return path if path and os.access(path, os.X_OK) else None


def program_python(*, vllm_on_cpu: bool) -> tuple[str, bool]:
    """(the python a training or evaluation program runs with, whether that is vLLM's CPU environment): the CPU
    build's for a program that generates with vLLM without a GPU, where this worker has one; else this one's."""
    cpu_python = vllm_cpu_python() if vllm_on_cpu else None
    return (cpu_python, True) if cpu_python else (sys.executable, False)


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """In a child, before exec: ``sig`` when its parent dies (a parent killed with -9 included). The training
    process gets SIGKILL when its supervisor dies; the demo's servers get SIGTERM when the demo does."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, sig)  # PR_SET_PDEATHSIG


def stop(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds. A Ray run's job: stop_job."""
    if proc.poll() is not None:
        return
    if proc.pid is None:  # a workers.rayjobs.RayJob
        proc.stop()
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # the group outlives its leader while a member still runs (a vLLM server's engine core): the same grace, then KILL
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_until_answers(proc: subprocess.Popen, url: str, timeout: float, *, what: str, every: float = 1.0) -> None:
    """Return once ``url`` answers 200, while ``proc`` (the server behind it) lives; RuntimeError, with the server
    killed, when it exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(every)
    kill_tree(proc)
    raise RuntimeError(f"{what} did not answer within {timeout:g} s")


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` and, when it leads a process group of its own (a vLLM server and its engine), the group."""
    try:
        leads = os.getpgid(proc.pid) == proc.pid
    except ProcessLookupError:
        return
    if leads:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.kill()


def celery_worker_command(queues: str | list[str], name: str, *, loglevel: str = "INFO") -> list[str]:
    """The command line of a Celery worker of this app serving ``queues``: one process, taking one task at a time
    (prefetch 1), since a training run or a sandbox check holds its worker for its whole length."""
    queue_list = queues if isinstance(queues, str) else ",".join(queues)
    return [sys.executable, "-m", "celery", "-A", "grpo_web", "worker", "-Q", queue_list, "--concurrency", "1",
            "--prefetch-multiplier", "1", "-n", name, "-l", loglevel]  # fmt: skip
