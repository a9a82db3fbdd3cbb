"""Start a Celery worker that serves what this machine can run: training-gpu1..N for N GPUs (one run at a time per
worker), plain "training" for CPU runs, "training-ray" when RAY_ADDRESS names a Ray cluster, and optionally the sandbox queue."""

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand

from grpo_web.queues import DEFAULT_QUEUE, SANDBOX_QUEUE, training_queue
from workers.processes import celery_worker_command
from workers.registry import detect_gpus


class Command(BaseCommand):
    help = "Run a Celery worker whose queues match this machine's GPUs."

    def add_arguments(self, parser):
        parser.add_argument("--cpu-runs", action="store_true", help="also take runs that need no GPU")
        parser.add_argument("--sandbox", action="store_true", help="also serve reward tests and contract checks")
        parser.add_argument("--name", default="gpu@%h")

    def handle(self, *args, cpu_runs, sandbox, name, **options):
        gpus = len(detect_gpus())
        queues = [training_queue(n) for n in range(1, gpus + 1)]
        if cpu_runs or not gpus:
            queues.append(training_queue(0))
        if settings.GRPO_RAY_ADDRESS:
            queues.append(training_queue(0, "ray"))  # runs for the Ray cluster: this worker submits and watches them
        if sandbox:
            queues += [SANDBOX_QUEUE, DEFAULT_QUEUE]
        self.stdout.write(f"{gpus} GPU(s); queues: {', '.join(queues)}")
        os.execv(
            sys.executable,
            celery_worker_command(queues, name),
        )
