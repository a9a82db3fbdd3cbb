"""What reviewers found in a run: labels on a rollout, a group or a step (runs.rollouts.labels), and review queues
that hand a run's rollouts to reviewers one at a time (runs.review)."""

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from runs.models.lifecycle import Run

# The labels every run offers; a run's reviewers may add their own names beside them.
BUILT_IN_LABELS = ("reward hack", "correct but scored wrong", "format only", "good reasoning", "garbled")


class Label(models.Model):
    """One reviewer's label on a rollout (rollout_id set), a group (group set) or a step (neither), with an optional
    note and, on a rollout, the span of its completion it points at. Two reviewers who disagree both keep theirs."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="labels")
    step = models.PositiveIntegerField()
    group = models.PositiveIntegerField(null=True, blank=True, help_text="None: a label on the whole step.")
    # A plain id, not a foreign key: rollouts carry no constraint (their ingest speed, runs/models/rollouts.py), and
    # a run's deletion deletes its labels with it.
    rollout_id = models.BigIntegerField(null=True, blank=True, help_text="None: a label on a group or a step.")
    name = models.CharField(max_length=64)
    note = models.TextField(blank=True)
    span_start = models.PositiveIntegerField(null=True, blank=True, help_text="UTF-16 units of the completion.")
    span_end = models.PositiveIntegerField(null=True, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    review = models.ForeignKey(
        "Review", on_delete=models.SET_NULL, null=True, blank=True, related_name="labels", help_text="Made in it."
    )

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["run", "rollout_id"], name="label_run_rollout"),
            models.Index(fields=["run", "step", "group"], name="label_run_step_group"),
            models.Index(fields=["run", "name", "step"], name="label_run_name_step"),
        ]

    @property
    def target(self) -> str:
        return "rollout" if self.rollout_id is not None else "group" if self.group is not None else "step"


class Review(models.Model):
    """A review queue: rollouts a filter of the browser selected (a sample stratified across steps, or every match),
    handed to its reviewers one at a time, none to two of them at once."""

    class Mode(models.TextChoices):
        SAMPLE = "sample", "a sample across steps"
        ALL = "all", "every match"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="reviews")
    name = models.CharField(max_length=200, blank=True)
    query = models.TextField(blank=True, help_text="The rollout browser's query string it was made from.")
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.SAMPLE)
    size = models.PositiveIntegerField(help_text="How many rollouts it holds.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return self.name or f"review {self.pk}"

    def get_absolute_url(self):
        return reverse("run_review", args=[self.run_id, self.pk])


class ReviewItem(models.Model):
    """One rollout of a review, at its position; claimed by the reviewer it was handed to, done once they moved on."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    rollout_id = models.BigIntegerField()
    step = models.PositiveIntegerField()
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    done_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["review", "position"], name="review_item_position")]
        indexes = [models.Index(fields=["review", "done_at", "position"], name="review_item_open")]


class AlertVerdict(models.Model):
    """A reviewer's verdict on a health or detector alert, for the evidence it showed (``evidence``: a digest of the
    alert's link to its rollouts): confirmed, or dismissed as a false alarm. A dismissed alert stops being raised for
    that evidence; new evidence raises it again. The latest verdict on an alert's evidence stands."""

    class Verdict(models.TextChoices):
        CONFIRMED = "confirmed", "confirmed"
        DISMISSED = "dismissed", "dismissed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="alert_verdicts")
    key = models.CharField(max_length=64, help_text="The alert's key: detector/repetition, entropy_collapse, ...")
    evidence = models.CharField(max_length=16)
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    note = models.TextField(blank=True)
    labeled = models.PositiveIntegerField(default=0, help_text="Rollouts labeled with it.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "key", "evidence"], name="alert_verdict_per_evidence"),
        ]
