from django.conf import settings
from django.db import models


class RewardFunction(models.Model):
    """A reward function a user can pick for a run. Built-ins reference ``rewards.builtins``; ``source`` is shown."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reward_functions")
    name = models.SlugField(max_length=64, help_text="Logged by TRL as rewards/<name>/mean.")
    builtin = models.CharField(max_length=64, help_text="Name of the built-in in rewards.builtins.")
    description = models.TextField(blank=True)
    source = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="reward_name_unique_per_owner")]

    def __str__(self):
        return self.name
