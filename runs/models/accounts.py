"""Team shares of datasets and runs, and personal access tokens (runs.accounts)."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from grpo_web.sharing import ShareBase
from runs.models.datasets import Dataset
from runs.models.lifecycle import Run


class DatasetShare(ShareBase):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="shares")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "team"], name="dataset_share_unique")]


class RunShare(ShareBase):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="shares")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "team"], name="run_share_unique")]


class ApiToken(models.Model):
    """A personal access token for the JSON API and the command-line client. Only its SHA-256 is kept: the token
    itself is shown once, when it is made. ``read`` tokens may only read; ``write`` tokens may also create, start and
    cancel, as their owner could in a browser; ``attach`` tokens may only create and send attached runs (the
    client in a training script, runs.attach), nothing else."""

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"
        ATTACH = "attach"

    PREFIX = "gwp_"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    digest = models.CharField(max_length=64, unique=True, editable=False, help_text="SHA-256 of the token, in hex.")
    hint = models.CharField(max_length=16, editable=False, help_text="The token's first characters, to recognise it.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.hint}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def revoke(self):
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
