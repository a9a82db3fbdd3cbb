"""Datasets, their immutable versions and their background imports (runs.datasets)."""

from pathlib import Path

from django.conf import settings
from django.db import models
from django.urls import reverse

from grpo_web.sharing import SharedQuerySet
from runs.models.jobs import NOT_CANCELLABLE, Job, JobStatus


class Dataset(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = SharedQuerySet.as_manager()

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
    """An immutable, validated copy of a dataset: its rows in a Parquet file, and how they feed training.

    Nothing here changes after creation: a new upload, or a new mapping of the same rows, is a new version, so a run
    that pinned a version trains on exactly what it was shown."""

    class PromptFormat(models.TextChoices):
        STANDARD = "standard", "standard (prompt is text)"
        CONVERSATIONAL = "conversational", "conversational (prompt is a list of messages)"

    class Split(models.TextChoices):
        NONE = "none", "no evaluation split"
        FRACTION = "fraction", "a random fraction"
        COLUMN = "column", "a column ('train' rows train)"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    path = models.CharField(max_length=500, help_text="The rows: a Parquet file, shared by the mappings of one upload.")
    source_name = models.CharField(max_length=255, blank=True)
    source_format = models.CharField(max_length=16, blank=True, help_text="jsonl, json, csv, parquet or hf")
    based_on = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The version whose rows this one maps anew.",
    )
    columns = models.JSONField(default=list)
    column_types = models.JSONField(default=dict, help_text="Column -> text, integer, number, messages, list, ...")
    row_count = models.PositiveIntegerField()
    size_bytes = models.BigIntegerField(default=0, help_text="Size of the Parquet file.")
    # the mapping: what the trainer receives (runs.dataset_mapping.Mapping)
    prompt_column = models.CharField(max_length=200, default="prompt")
    prompt_format = models.CharField(max_length=16, choices=PromptFormat.choices, default=PromptFormat.STANDARD)
    system_prompt = models.TextField(blank=True)
    prompt_template = models.TextField(blank=True, help_text="Text with {column} fields; blank: the prompt column.")
    reward_columns = models.JSONField(default=list, help_text="Columns passed to reward functions by name.")
    split = models.CharField(max_length=16, choices=Split.choices, default=Split.NONE)
    eval_fraction = models.FloatField(default=0.0)
    split_seed = models.IntegerField(default=0)
    split_column = models.CharField(max_length=200, blank=True)
    train_rows = models.PositiveIntegerField(default=0)
    eval_rows = models.PositiveIntegerField(default=0)
    provenance = models.JSONField(
        default=dict,
        blank=True,
        help_text="Where the rows came from when the app made them: a rejection-sampling "
        "job's model, rewards, threshold and kept share per prompt.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="dataset_version_unique")]

    def __str__(self):
        return f"{self.dataset.name} v{self.number}"

    def get_absolute_url(self):
        return reverse("dataset_version", args=[self.dataset_id, self.number])


class DatasetImport(Job):
    """A Hugging Face import, run in the background by a worker: queued, running (with its progress), then a new
    version or the errors that refused it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dataset_imports")
    dataset = models.ForeignKey(
        Dataset,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="imports",
        help_text="Set when the import adds a version to this dataset.",
    )
    name = models.CharField(max_length=200, blank=True)
    source = models.JSONField(
        default=dict,
        help_text="local_path (absolute, under an import root) or hub_id, config, split; prompt_column, gsm8k_column.",
    )
    status = models.CharField(max_length=16, choices=NOT_CANCELLABLE, default=JobStatus.QUEUED)
    progress = models.CharField(max_length=200, blank=True)
    rows_done = models.BigIntegerField(default=0)
    errors = models.JSONField(default=list)
    version = models.ForeignKey(DatasetVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.source.get("hub_id") or Path(self.source.get("local_path") or "import").name

    def get_absolute_url(self):
        return reverse("dataset_import_detail", args=[self.pk])
