import os
import threading

from celery import Celery
from celery.signals import worker_init, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "grpo_web.settings")

app = Celery("grpo_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers"])

_stop_heartbeat = threading.Event()


@worker_init.connect
def _start_embedded_redis(**kwargs):
    from grpo_web.embedded import ensure_configured_redis  # signal handlers: Django is set up only by now

    ensure_configured_redis()


@worker_ready.connect
def _announce(sender, **kwargs):
    """Register this worker (host, GPUs, vLLM, queues) and start its heartbeat, which also runs the reaper."""
    from workers.registry import announce, start_heartbeat  # needs the app registry, ready only by now

    queues = sorted(q.name for q in sender.app.amqp.queues.consume_from.values()) if sender else []
    announce(sender.hostname, queues)
    start_heartbeat(sender.hostname, queues, _stop_heartbeat)


@worker_shutdown.connect
def _stop(**kwargs):
    _stop_heartbeat.set()
