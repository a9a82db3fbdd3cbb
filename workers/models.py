from django.db import models


class Worker(models.Model):
    """A Celery worker that announced itself: what it can run (GPUs, vLLM) and when it was last seen."""

    name = models.CharField(max_length=200, unique=True, help_text="Celery node name, e.g. gpu@host.")
    hostname = models.CharField(max_length=200)
    queues = models.JSONField(default=list)
    gpus = models.JSONField(default=list, help_text="[{index, name, memory_mb}] as torch.cuda reports them.")
    vllm = models.BooleanField(default=False, help_text="vLLM is importable on this worker.")
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name
