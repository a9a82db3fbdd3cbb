"""Runs made from the files another trainer wrote (runs.attach.importing): where they came from, what was read, and
whether the folder is still followed."""

from django.db import models

from runs.models.lifecycle import Run


class RunImport(models.Model):
    """The files an imported run was made from (one folder, table or dump), the options it was read
    with, and the files read so far: watch mode reads only the rest."""

    class Source(models.TextChoices):
        TRL = "trl", "TRL completions tables"
        VERL = "verl", "verl rollout dumps"
        TRACKIO = "trackio", "Trackio project"

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="run_import")
    source = models.CharField(max_length=8, choices=Source.choices)
    path = models.TextField(help_text="The server path read (under GRPO_IMPORT_ROOTS), or the upload's name.")
    uploaded = models.BooleanField(default=False)
    options = models.JSONField(default=dict, help_text="What the converter was told (reward names, weights, ...).")
    files = models.JSONField(default=list, help_text="Names of the files read so far.")
    state = models.JSONField(default=dict, help_text="What the next read needs (TRL: the last batch's fingerprint).")
    every = models.PositiveIntegerField(null=True, help_text="The trainer wrote rollouts every this many steps.")
    advantage_computed = models.BooleanField(
        default=False, help_text="Advantages recomputed by grpo-web from the scores (verl's GRPO estimator)."
    )
    length_known = models.BooleanField(default=True, help_text="Completion lengths are token counts.")
    notes = models.JSONField(default=list)
    watching = models.BooleanField(default=False, help_text="The folder is followed while the run writes it.")
    polled_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Why the last read of a watched folder stopped.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.get_source_display()} for run {self.run_id}"
