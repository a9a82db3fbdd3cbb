"""One command for a laptop: migrate, collect the static files, build the tiny model, load demo data, start Redis, a
worker and the web server.

Ctrl-C, SIGTERM or SIGHUP stop it and everything it started."""

import functools
import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from grpo_web.embedded import ensure_configured_redis, redis_running, stop_redis
from grpo_web.env import envstr
from grpo_web.queues import CHECKS_QUEUE, DEFAULT_QUEUE, SANDBOX_QUEUE, TRAINING_QUEUE
from workers.processes import celery_worker_command, die_with_parent


def _stop(signum, frame):
    raise KeyboardInterrupt  # SIGTERM and SIGHUP stop the demo as Ctrl-C does: its children with it


class Command(BaseCommand):
    help = "Run the whole demo: web server and one Celery worker on the embedded defaults."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, host, port, **options):
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGHUP, _stop)
        call_command("migrate", interactive=False, verbosity=0)
        # hashed, compressed static files, cached for a year (grpo_web.staticstorage): the pages' first load is light
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("build_tiny_model")
        call_command("load_demo")
        # an embedded Redis the demo starts is the demo's to stop; one already running (another demo's, a test's) is not
        started_redis = settings.REDIS_EMBEDDED and not redis_running(settings.DATA_DIR)
        ensure_configured_redis()
        env = dict(os.environ)  # children derive the same settings, so they share the embedded Redis
        # each child gets SIGTERM if the demo dies without stopping it (killed with -9)
        start = functools.partial(
            subprocess.Popen,
            env=env,
            cwd=settings.BASE_DIR,
            preexec_fn=functools.partial(die_with_parent, signal.SIGTERM),
        )
        procs = [
            # the training queue, one run at a time (a GPU worker's job) ...
            start(celery_worker_command([TRAINING_QUEUE], "train@%h")),
            # ... reward tests, replays and imports, which must not wait behind a run ...
            start(celery_worker_command([SANDBOX_QUEUE, DEFAULT_QUEUE], "sandbox@%h")),
            # ... and the contract check a Start waits for, which must not wait behind any of those
            start(celery_worker_command([CHECKS_QUEUE], "checks@%h")),
            start([sys.executable, "-m", "uvicorn", "grpo_web.asgi:application", "--host", host, "--port", str(port)]),
        ]
        password = envstr("GRPO_DEMO_PASSWORD", "demo")
        self.stdout.write(
            self.style.SUCCESS(
                f"\ngrpo-web is running: http://{host}:{port}/  (login: demo / {password})\nCtrl-C stops it.\n"
            )
        )
        try:
            while all(p.poll() is None for p in procs):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal does not cut the clean-up short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
            if started_redis:  # the demo started the embedded Redis: a clean stop leaves nothing running
                stop_redis(settings.DATA_DIR)
        failed = [p.args[2] for p in procs if p.returncode not in (0, -signal.SIGTERM, None)]
        if failed:
            sys.exit(f"stopped: {', '.join(failed)} exited")
