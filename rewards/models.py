from django.conf import settings
from django.db import models
from django.urls import reverse

from grpo_web.sharing import ShareBase, SharedQuerySet


class RewardFunction(models.Model):
    """A user's reward function. Its code lives in immutable versions; runs pin the version they used."""

    class Kind(models.TextChoices):
        REWARD = "reward", "reward function"
        TOOL = "tool", "tool"
        ENVIRONMENT = "environment", "environment"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reward_functions")
    kind = models.CharField(
        max_length=12,
        choices=Kind.choices,
        default=Kind.REWARD,
        help_text="A reward function scores completions; a tool is called by the model while it "
        "generates (TRL's tools); an environment is a class whose methods are tools, "
        "one instance per rollout (TRL's environment_factory). All run in the sandbox.",
    )
    name = models.SlugField(max_length=64, help_text="Logged by TRL as rewards/<name>/mean.")
    description = models.TextField(blank=True)
    template = models.CharField(max_length=64, blank=True, help_text="The library template it started from.")
    created_at = models.DateTimeField(auto_now_add=True)
    label_suite = models.JSONField(
        default=dict,
        blank=True,
        help_text="Labeled rollouts as its tests (rewards.label_suite): {runs: [ids], expectations: [{label, expect, "
        "value}]}.",
    )

    objects = SharedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="reward_name_unique_per_owner")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("reward_detail", args=[self.pk])

    @property
    def latest_version(self):
        return self.versions.order_by("-number").first()


class RewardFunctionVersion(models.Model):
    """One saved state of the code. Never edited: saving changed code creates the next number."""

    function = models.ForeignKey(RewardFunction, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    source = models.TextField()
    entrypoint = models.CharField(max_length=100, help_text="The function in the source that TRL calls.")
    created_at = models.DateTimeField(auto_now_add=True)
    label_agreement = models.JSONField(
        null=True,
        blank=True,
        help_text="Its last check against the function's label suite: {agrees, total, suite, checked_at}.",
    )

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["function", "number"], name="reward_version_unique")]

    def __str__(self):
        return f"{self.function.name} v{self.number}"

    def get_absolute_url(self):
        return reverse("reward_version", args=[self.function_id, self.number])


class RewardShare(ShareBase):
    function = models.ForeignKey(RewardFunction, on_delete=models.CASCADE, related_name="shares")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["function", "team"], name="reward_share_unique")]
