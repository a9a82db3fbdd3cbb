"""The worker registry: written by workers.registry, read when a run asks for GPUs and by the workers page."""

from django.db import models
from django.utils import timezone


class Worker(models.Model):
    """A Celery worker that announced itself: what it can run (GPUs, vLLM) and when it was last seen. Written by
    workers.registry; read when a run asks for GPUs or vLLM, and by the workers page."""

    ONLINE_SECONDS = 120  # a worker heard from within this long is online (its heartbeat beats far more often)

    name = models.CharField(max_length=200, unique=True, help_text="Celery node name, e.g. gpu@host.")
    hostname = models.CharField(max_length=200)
    queues = models.JSONField(default=list)
    gpus = models.JSONField(default=list, help_text="[{index, name, memory_mb}] as torch.cuda reports them.")
    vllm = models.BooleanField(default=False, help_text="vLLM is importable on this worker.")
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        db_table = "workers_worker"  # created by the workers app before the model moved here (runs 0008)
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def online(self) -> bool:
        return (timezone.now() - self.last_seen).total_seconds() < self.ONLINE_SECONDS
