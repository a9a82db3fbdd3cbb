"""What a training process used, sampled by its worker (runs.telemetry)."""

from django.db import models

from runs.models.lifecycle import Run


class ResourceSample(models.Model):
    """What the training process used at one moment, sampled by the worker: CPU and memory of the process tree,
    and per GPU its utilisation and memory where there are GPUs."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="resource_samples")
    at = models.DateTimeField()
    step = models.PositiveIntegerField(default=0)
    cpu_percent = models.FloatField(help_text="Of one core: 200 is two cores busy.")
    rss_bytes = models.BigIntegerField()
    gpus = models.JSONField(default=list, help_text="[{index, util, mem_used, mem_total}] (bytes, %).")

    class Meta:
        ordering = ["at"]
        indexes = [models.Index(fields=["run", "at"], name="resource_run_at")]
