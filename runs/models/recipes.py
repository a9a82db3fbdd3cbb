"""Recipes: ordered stages of runs, jobs and evaluations (runs.recipes)."""

from django.conf import settings
from django.db import models
from django.urls import reverse


class Recipe(models.Model):
    """An ordered list of stages (sft, grpo, rejection_sample, eval) whose inputs name earlier stages' outputs
    ("model": "stage:2", "dataset": "stage:3"). Each stage is an ordinary run, rejection-sampling job or evaluation;
    the recipe starts the next one when a stage completes (runs.recipes.services.recipe_advance). A failed stage stops
    the recipe, resumable from that stage. Visible to its owner only."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="recipes")
    name = models.CharField(max_length=200)
    stages = models.JSONField(help_text="[{kind, name, model, dataset, rewards, config, settings}] in order.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    current = models.PositiveSmallIntegerField(default=0, help_text="The stage running (or that failed).")
    outputs = models.JSONField(
        default=list, help_text="Per stage: {run, job, evaluation, model, dataset_version, status, figures}."
    )
    error = models.TextField(blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="clones")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("recipe_detail", args=[self.pk])
