"""Rejection-sampling jobs and their samples (runs.sampling)."""

from django.conf import settings
from django.db import models, transaction
from django.urls import reverse
from django.utils import timezone

from runs.models.datasets import DatasetVersion
from runs.models.fields import ExactJSONField, ExactTextField
from runs.models.jobs import Job


class RejectionJob(Job):
    """Rejection sampling (R1's stage 3): k completions per prompt of a dataset version from any model, scored by
    reward functions in the sandbox; those at or above a threshold (at most m per prompt, deduplicated), with rows of
    another dataset mixed in if asked, become a new SFT dataset version that records where it came from. Visible to
    its owner only."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rejection_jobs")
    name = models.CharField(max_length=200)
    model = models.CharField(max_length=500, help_text="The model sampled: 'tiny', a folder, or a hub id.")
    dataset_version = models.ForeignKey(
        DatasetVersion, on_delete=models.PROTECT, related_name="+", help_text="The prompts."
    )
    split = models.CharField(max_length=8, default="all", help_text="'train', 'eval' or 'all' rows of the version.")
    rewards = models.JSONField(help_text="[{name, weight, version_id, version}] that score the samples.")
    settings = models.JSONField(
        help_text="k, temperature, max_new_tokens, max_prompts, solved_by, threshold, max_per_prompt, mix_rows, seed."
    )
    mix_version = models.ForeignKey(
        DatasetVersion,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Rows mixed into the output (prompt-completion), if any.",
    )
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    stats = models.JSONField(
        default=dict,
        blank=True,
        help_text="prompts, samples, kept, duplicates, mixed_in, kept_share, kept_share_per_prompt.",
    )
    output_version = models.ForeignKey(
        DatasetVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("rejection_job_detail", args=[self.pk])

    @property
    def job_dir(self):
        return settings.DATA_DIR / "rejection" / str(self.pk)

    def mark_failed(self, error: str, log_tail: str = ""):
        """Failed, unless it was cancelled meanwhile (a cancelled job's process ends with an error of its own)."""
        with transaction.atomic():
            if RejectionJob.objects.select_for_update().filter(pk=self.pk, status=self.Status.CANCELLED).exists():
                return
            self.status, self.error, self.log_tail, self.finished_at = (
                self.Status.FAILED,
                error,
                log_tail,
                timezone.now(),
            )
            self.save(update_fields=["status", "error", "log_tail", "finished_at"])


class RejectionSample(models.Model):
    """One sampled completion of a rejection-sampling job, with its rewards and whether it was kept."""

    job = models.ForeignKey(RejectionJob, on_delete=models.CASCADE, related_name="samples")
    prompt_index = models.PositiveIntegerField()
    sample = models.PositiveSmallIntegerField()
    prompt = ExactTextField()
    completion = ExactTextField()
    rewards = models.JSONField(help_text="Per reward function, in the job's order; None where it abstained.")
    reward = models.FloatField(null=True)
    passed = models.BooleanField(default=False, help_text="At or above the threshold.")
    duplicate = models.BooleanField(default=False, help_text="Passed, but the same text as a kept one.")
    kept = models.BooleanField(default=False, help_text="In the output dataset.")
    length = models.PositiveIntegerField(default=0)
    truncated = models.BooleanField(default=False)
    columns = ExactJSONField(default=dict)

    class Meta:
        ordering = ["prompt_index", "sample"]
        constraints = [models.UniqueConstraint(fields=["job", "prompt_index", "sample"], name="rejection_sample_key")]
