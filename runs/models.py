import uuid

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone


class Dataset(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("dataset_detail", args=[self.pk])

    @property
    def latest_version(self):
        return self.versions.order_by("-number").first()


class DatasetVersion(models.Model):
    """An immutable, validated copy of an upload: normalised JSON lines on disk, one row a line."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    path = models.CharField(max_length=500)
    source_name = models.CharField(max_length=255, blank=True)
    columns = models.JSONField(default=list)
    prompt_column = models.CharField(max_length=200, default="prompt")
    row_count = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="dataset_version_unique")]

    def __str__(self):
        return f"{self.dataset.name} v{self.number}"


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False, help_text="Names the run's folder.")
    name = models.CharField(max_length=200)
    model = models.CharField(max_length=500, help_text="Local path or Hugging Face hub id.")
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="runs")
    rewards = models.JSONField(help_text="[{name, builtin, weight}] as used by the training program.")
    config = models.JSONField(help_text="GRPOConfig fields under TRL's names.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    event_offset = models.BigIntegerField(default=0, help_text="Bytes of the event log already ingested.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("run_detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0

    @property
    def run_dir(self):
        return settings.DATA_DIR / "runs" / str(self.uid)

    @property
    def reward_names(self) -> list[str]:
        return [r["name"] for r in self.rewards]

    def mark_running(self):
        self.status, self.started_at = self.Status.RUNNING, timezone.now()
        self.save(update_fields=["status", "started_at"])

    def mark_completed(self):
        self.status, self.finished_at = self.Status.COMPLETED, timezone.now()
        self.save(update_fields=["status", "finished_at"])

    def mark_failed(self, error: str, log_tail: str = ""):
        self.status, self.error, self.log_tail, self.finished_at = self.Status.FAILED, error, log_tail, timezone.now()
        self.save(update_fields=["status", "error", "log_tail", "finished_at"])


class StepMetric(models.Model):
    """TRL's logged metrics for one optimizer step (reward, reward_std, rewards/<fn>/mean, kl, entropy, ...)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="step_metrics")
    step = models.PositiveIntegerField()
    metrics = models.JSONField()
    logged_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="step_metric_unique")]


class Rollout(models.Model):
    """One completion of one generation batch, with TRL's per-function rewards and advantage. Key: (run, step, index)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rollouts")
    step = models.PositiveIntegerField()
    index = models.PositiveIntegerField(help_text="Position in the generation batch.")
    group = models.PositiveIntegerField(help_text="index // num_generations: completions of the same prompt.")
    prompt = models.TextField()
    completion = models.TextField()
    rewards = models.JSONField(help_text="Per reward function, in the run's order; None where the function abstained.")
    reward = models.FloatField(null=True, help_text="Weighted sum of the per-function rewards.")
    advantage = models.FloatField()
    length = models.PositiveIntegerField(help_text="Completion length in tokens.")
    truncated = models.BooleanField(default=False)
    reflections = models.JSONField(default=list, help_text="Self-reflection phrases found in the completion.")

    class Meta:
        ordering = ["step", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "step", "index"], name="rollout_key")]
