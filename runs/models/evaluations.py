"""Evaluations of a run's models and their samples (runs.evaluations)."""

from django.conf import settings as conf  # "settings" is a field name below
from django.db import models

from runs.models.datasets import DatasetVersion
from runs.models.fields import ExactJSONField, ExactTextField
from runs.models.jobs import Job
from runs.models.lifecycle import Run


class Evaluation(Job):
    """One evaluation of one model on a dataset version's eval prompts: k samples and one greedy completion per prompt,
    scored by the run's reward functions (workers.training.evaluate). Periodic ones come from the training run itself (one
    per evaluated step); standalone ones are jobs a user starts on the run page (the base model, a checkpoint, the
    final model, any model folder). An imported run's periodic evaluations are read from its trainer's files (verl's
    validation dumps: runs.attach.importers.verl); ``imported_from`` names the file."""

    class Kind(models.TextChoices):
        PERIODIC = "periodic"
        STANDALONE = "standalone"

    class Generator(models.TextChoices):
        TRANSFORMERS = "transformers", "transformers' generate"
        AUTO = "auto", "vLLM where the worker can run it (a GPU, or vLLM's CPU build), else transformers"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="evaluations")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    step = models.PositiveIntegerField(
        null=True, blank=True, help_text="Periodic: the training step evaluated. A checkpoint: its step."
    )
    requested_by = models.ForeignKey(
        conf.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="A standalone evaluation: who queued it; their access is checked again when it starts.",
    )
    label = models.CharField(max_length=200, help_text="'step 4', 'base model', 'final model', 'checkpoint-10', ...")
    model = models.CharField(max_length=500, blank=True, help_text="The model folder or hub id evaluated.")
    dataset_version = models.ForeignKey(
        DatasetVersion,
        on_delete=models.PROTECT,
        related_name="evaluations",
        null=True,
        blank=True,
        help_text="The prompts evaluated; none for an imported evaluation (imported_from names its file).",
    )
    split = models.CharField(max_length=8, default="eval", help_text="'eval': the eval split; 'all': every row.")
    settings = models.JSONField(default=dict, help_text="grpo_web_protocol.config.EvalFields as used.")
    generator = models.CharField(
        max_length=16,
        choices=Generator.choices,
        default=Generator.TRANSFORMERS,
        help_text="A standalone evaluation: what samples its completions, as asked.",
    )
    generated_with = models.CharField(
        max_length=16, blank=True, help_text="What sampled them: 'vllm' or 'transformers' (blank until it ran)."
    )
    imported_from = models.CharField(
        max_length=500,
        blank=True,
        help_text="An imported evaluation: the file it was read from (verl's validation dump); blank for the app's own.",
    )
    k = models.PositiveSmallIntegerField(default=0)
    solved_by = models.CharField(max_length=200, blank=True, help_text="The reward that decided correctness.")
    threshold = models.FloatField(default=1.0)
    prompts = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(default=dict, help_text="mean@k, pass@k, maj@k, greedy, reward_mean@k, ...")
    seconds = models.FloatField(null=True, blank=True, help_text="Generation and scoring time.")
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)

    class Meta:
        ordering = ["kind", "step", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "step"], condition=models.Q(kind="periodic"), name="evaluation_periodic_step"
            )
        ]

    def __str__(self):
        return f"{self.run.name}: {self.label}"

    @property
    def evaluated(self) -> str:
        """What was evaluated, as the pages name it. ``model`` is the run's base model for a periodic evaluation too,
        but one after step 0 scored the policy the run was training at that step, not the base model."""
        if self.kind == self.Kind.PERIODIC and self.step:
            return f"this run, step {self.step}"
        return self.model

    @property
    def eval_dir(self):
        return self.run.run_dir / "evaluations" / str(self.pk)


class EvalSample(models.Model):
    """One completion of an evaluation: sample 0..k-1 of a prompt, or its greedy completion (sample k)."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="samples")
    prompt_index = models.PositiveIntegerField()
    sample = models.PositiveSmallIntegerField()
    greedy = models.BooleanField(default=False)
    prompt = ExactTextField()
    prompt_key = models.CharField(max_length=16, default="")
    completion = ExactTextField()
    rewards = models.JSONField(help_text="Per reward function, in the run's order; None where it abstained.")
    reward = models.FloatField(null=True)
    correct = models.BooleanField(default=False)
    answer = models.CharField(max_length=200, blank=True, help_text="The extracted answer maj@k votes on.")
    length = models.PositiveIntegerField()
    truncated = models.BooleanField(default=False)
    columns = ExactJSONField(default=dict)

    class Meta:
        ordering = ["prompt_index", "sample"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "prompt_index", "sample"], name="eval_sample_key")]
