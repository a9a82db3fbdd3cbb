"""What a run logged (TRL's metrics per step, its rollouts) and reward replays of it (runs.rollouts)."""

import math

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from runs.models.fields import ExactJSONField, ExactTextField, PackedTextField
from runs.models.jobs import NOT_CANCELLABLE, Job, JobStatus
from runs.models.lifecycle import Run
from runs.text import prompt_key


class StepMetric(models.Model):
    """TRL's logged metrics for one optimizer step (reward, reward_std, rewards/<fn>/mean, kl, entropy, ...)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="step_metrics")
    step = models.PositiveIntegerField()
    metrics = models.JSONField()
    logged_at = models.DateTimeField(null=True)

    class Meta:
        ordering = ["step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="step_metric_unique")]


def reward_bucket(reward: float | None) -> int | None:
    """Rollout.reward_bucket: floor(4·asinh(reward)). About a quarter wide near 0 and 1, wider for large rewards, so
    a run has a handful of buckets (a dozen for rewards in [-1, 2], some 40 for [-100, 100])."""
    return None if reward is None else math.floor(4 * math.asinh(reward))


class PromptKeyField(models.CharField):
    """Rollout.prompt_key: given by the ingest (runs.text.prompt_key), or computed from the row's prompt when a row
    is saved without one, so that every row names its prompt in its run's prompts (RunPrompt)."""

    def pre_save(self, model_instance, add):
        value = getattr(model_instance, self.attname)
        if not value and isinstance(getattr(model_instance, "prompt", None), str):
            value = prompt_key(model_instance.prompt)
            setattr(model_instance, self.attname, value)
        return value

    def deconstruct(self):  # a CharField in the database and in migrations: nothing to alter there
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class Rollout(models.Model):
    """One completion of one generation batch, with TRL's per-function rewards and advantage. Key: (run, step, index)."""

    # No index of its own: the key (run, step, index) and the indexes below all start with run. No database
    # constraint either: checking it row by row costs the ingest a quarter of its speed (bench/ingest.py), rows come
    # only from the ingest of an existing run, and deleting a run still deletes its rollouts (Django, one DELETE).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rollouts", db_index=False, db_constraint=False)
    step = models.PositiveIntegerField()
    index = models.PositiveIntegerField(help_text="Position in the generation batch.")
    group = models.PositiveIntegerField(help_text="index // num_generations: completions of the same prompt.")
    prompt = ExactTextField()
    prompt_key = PromptKeyField(max_length=16, default="", help_text="A hash of the prompt: one prompt across steps.")
    completion = PackedTextField()  # compressed on SQLite (zlib), as PostgreSQL compresses it in TOAST
    rewards = models.JSONField(help_text="Per reward function, in the run's order; None where the function abstained.")
    reward = models.FloatField(null=True, help_text="Weighted sum of the per-function rewards.")
    reward_bucket = models.SmallIntegerField(
        null=True, help_text="reward_bucket(reward): the browser reads rollouts in advantage order bucket by bucket."
    )
    advantage = models.FloatField()
    length = models.PositiveIntegerField(help_text="Completion length in tokens.")
    truncated = models.BooleanField(default=False)
    zero_std = models.BooleanField(default=False, help_text="Its group's rewards were all equal: no learning signal.")
    reflections = models.JSONField(default=list, help_text="Self-reflection phrases found in the completion.")
    reflective = models.BooleanField(default=False, help_text="Holds at least one self-reflection phrase.")
    reflection_mask = models.BigIntegerField(
        default=0,
        help_text="Bit i set: the run's phrase i was found. Kept in "
        "the browser's index, so filtering on a phrase "
        "reads no row it does not keep.",
    )
    columns = ExactJSONField(default=dict, help_text="The dataset row's other columns, as the rewards saw them.")
    messages = ExactJSONField(
        null=True,
        blank=True,
        help_text="A conversational completion as TRL produced it: its turns, the tool calls "
        "(name, arguments) and the tools' results. None for plain text.",
    )
    step_scores = models.JSONField(
        null=True,
        blank=True,
        help_text="Per-step (process) scores a reward logged through TRL's log_extra: "
        "{split: the delimiter, scores: [a number or None per step]}.",
    )
    first_step_score = models.FloatField(null=True, blank=True, help_text="The first scored step's score.")

    class Meta:
        ordering = ["step", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "step", "index"], name="rollout_key")]
        # What the rollout browser needs at ten million rows (bench/browse.py): pages sorted by (advantage, id),
        # read bucket by bucket of reward (a reward range reads only its own buckets), with the browser's numeric
        # and yes/no filters checked in the index itself, before any row is read (runs/rollout_filters.py); one
        # prompt across steps; one step's groups read the key. Each index costs the ingest (bench/ingest.py), so
        # sorting by reward and searching text read rows instead.
        indexes = [
            models.Index(
                fields=[
                    "run",
                    "reward_bucket",
                    "advantage",
                    "id",
                    "reward",
                    "step",
                    "length",
                    "zero_std",
                    "reflective",
                    "truncated",
                    "reflection_mask",
                ],
                name="rollout_run_advantage",
            ),
            models.Index(fields=["run", "prompt_key", "step"], name="rollout_run_prompt"),
        ]


class RunPrompt(models.Model):
    """One prompt of a run, once: what a search of the prompts reads. A run repeats each prompt in every completion of
    its group and in every step that samples it again; indexing every copy cost the text index more than the prompts
    themselves (docs/scale.md), and a prompt phrase found in a thousand copies is found here once, then its rows by
    key (rollout_run_prompt). Filled from the stored rollouts by the database itself (runs.textindex: a trigger on
    each database), so every path that stores a rollout fills it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="prompts", db_index=False)
    key = models.CharField(max_length=16, help_text="Rollout.prompt_key: a hash of the prompt.")
    text = ExactTextField(help_text="The prompt, as the first stored rollout with this key had it.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key"], name="run_prompt_key")]


class Replay(Job):
    """A reward replay: a run's stored completions of some steps re-scored by other reward versions or weights, with
    the rewards and advantages TRL's formula gives them (runs.rollouts.replay); run by a task on the sandbox queue."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="replays")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="replays")
    rewards = models.JSONField(help_text="[{name, weight, version_id | builtin}] in the run's order, as replayed.")
    filters = models.JSONField(
        default=dict, blank=True, help_text="The rollout browser's filters that chose the steps."
    )
    steps = models.JSONField(default=list, help_text="The steps replayed (every completion of each).")
    status = models.CharField(max_length=16, choices=NOT_CANCELLABLE, default=JobStatus.QUEUED)
    done = models.PositiveIntegerField(default=0, help_text="Completions re-scored so far.")
    total = models.PositiveIntegerField(default=0)
    summary = models.JSONField(
        default=dict, blank=True, help_text="Per step: zero-variance shares before/after, groups whose best changed."
    )
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]

    def get_absolute_url(self):
        return reverse("run_replay", args=[self.run_id, self.pk])

    def mark_failed(self, error: str):
        self.status, self.error, self.finished_at = self.Status.FAILED, error, timezone.now()
        self.save(update_fields=["status", "error", "finished_at"])


class ReplayRow(models.Model):
    """One completion as replayed: its stored and replayed rewards, advantages and ranks in its group."""

    replay = models.ForeignKey(Replay, on_delete=models.CASCADE, related_name="rows")
    rollout_id = models.BigIntegerField()
    step = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    group = models.PositiveIntegerField()
    old_rewards = models.JSONField()
    new_rewards = models.JSONField()
    old_reward = models.FloatField(null=True)
    new_reward = models.FloatField(null=True)
    old_advantage = models.FloatField()
    new_advantage = models.FloatField()
    old_rank = models.PositiveSmallIntegerField()
    new_rank = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["step", "index"]
        constraints = [models.UniqueConstraint(fields=["replay", "step", "index"], name="replay_row_key")]
