import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "grpo_web.settings")

app = Celery("grpo_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["workers", "rewards"])


@worker_init.connect
def _start_embedded_redis(**kwargs):
    from grpo_web.embedded import ensure_configured_redis

    ensure_configured_redis()
