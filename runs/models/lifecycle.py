import math
import uuid
from pathlib import Path

from django.conf import settings
from django.db import models, transaction
from django.urls import reverse
from django.utils import timezone

from grpo_web.sharing import ShareBase, SharedQuerySet
from runs.phrases import default_reflection_phrases


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
    based_on = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                 help_text="The version whose rows this one maps anew.")
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
    provenance = models.JSONField(default=dict, blank=True,
                                  help_text="Where the rows came from when the app made them: a rejection-sampling "
                                            "job's model, rewards, threshold and kept share per prompt.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="dataset_version_unique")]

    def __str__(self):
        return f"{self.dataset.name} v{self.number}"

    def get_absolute_url(self):
        return reverse("dataset_version", args=[self.dataset_id, self.number])


class DatasetImport(models.Model):
    """A Hugging Face import, run in the background by a worker: queued, running (with its progress), then a new
    version or the errors that refused it."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dataset_imports")
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.CASCADE, related_name="imports",
                                help_text="Set when the import adds a version to this dataset.")
    name = models.CharField(max_length=200, blank=True)
    source = models.JSONField(default=dict, help_text="local_path (absolute, under an import root) or hub_id, "
                                                      "config, split; prompt_column, gsm8k_column.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.CharField(max_length=200, blank=True)
    rows_done = models.BigIntegerField(default=0)
    errors = models.JSONField(default=list)
    version = models.ForeignKey(DatasetVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.source.get("hub_id") or Path(self.source.get("local_path") or "import").name

    def get_absolute_url(self):
        return reverse("dataset_import_detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.COMPLETED, self.Status.FAILED)


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Kind(models.TextChoices):
        GRPO = "grpo", "GRPO"
        SFT = "sft", "SFT"

    class Trainer(models.TextChoices):
        TRL = "trl", "TRL"
        VERL = "verl", "verl"

    FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    trainer = models.CharField(max_length=8, choices=Trainer.choices, default=Trainer.TRL,
                               help_text="trl: TRL's trainer in one process (per GPU); verl: verl's GRPO on Ray with "
                                         "vLLM rollout (GPU workers), the same config translated to its keys.")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.GRPO,
                            help_text="grpo: TRL's GRPOTrainer; sft: TRL's SFTTrainer (config holds SFTConfig fields, "
                                      "rewards only score its evaluations).")
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False, help_text="Names the run's folder.")
    name = models.CharField(max_length=200)
    model = models.CharField(max_length=500, help_text="Local path or Hugging Face hub id.")
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="runs")
    rewards = models.JSONField(help_text="[{name, builtin, weight}] as used by the training program.")
    tools = models.JSONField(default=list, blank=True,
                             help_text="[{name, builtin} or {name, version_id}]: functions the model may call as it "
                                       "generates (TRL's tools), run in the sandbox.")
    environment = models.JSONField(default=dict, blank=True,
                                   help_text="{name, builtin} or {name, version_id}, or {} for none: an environment "
                                             "class whose methods the model calls (TRL's environment_factory), one "
                                             "instance per rollout, run in the sandbox.")
    config = models.JSONField(help_text="GRPOConfig (an SFT run: SFTConfig) fields under TRL's names.")
    config_extra = models.JSONField(default=dict, blank=True,
                                    help_text="Further GRPOConfig fields from an imported TRL config, passed through.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    event_offset = models.BigIntegerField(default=0, help_text="Bytes of the event log already ingested.")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="clones",
                               help_text="The run this one was cloned or retried from.")
    requested_gpus = models.PositiveSmallIntegerField(default=0, help_text="GPUs the run needs; 0 runs on a CPU.")
    engine = models.CharField(max_length=8, choices=[("local", "local"), ("ray", "Ray")], default="local",
                              help_text="local: a worker trains on its own machine; ray: the worker submits the run "
                                        "to its Ray cluster (RAY_ADDRESS) as a Ray job (README \"Scale out\").")
    num_workers = models.PositiveSmallIntegerField(default=1, help_text="Ray Train workers of a Ray run (DDP across "
                                                                        "them; each gets one GPU when the run asks "
                                                                        "for GPUs).")
    ray_slot_base = models.PositiveSmallIntegerField(
        null=True, blank=True, editable=False,
        help_text="A Ray run's first sandbox slot on the cluster's nodes, held while an attempt runs (its lease is "
                  "set): no two live Ray runs hold the same range (workers.supervisor.ray_slot_base).")
    worker_name = models.CharField(max_length=200, blank=True, help_text="The Celery worker that took the run.")
    attempt = models.PositiveSmallIntegerField(default=1, help_text="1, then +1 for each resume.")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from the supervisor.")
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    checkpoint_step = models.PositiveIntegerField(default=0, help_text="Step of the last checkpoint saved.")
    resumable = models.BooleanField(default=False, help_text="Failed or cancelled with a checkpoint to resume from.")
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When this attempt was last put in the queue.")
    lease = models.UUIDField(null=True, blank=True, editable=False,
                             help_text="The token of the supervisor that holds the current attempt; cleared when the "
                                       "attempt is taken from it (reaped), so a late supervisor can change nothing.")
    reward_faults = models.JSONField(default=dict, blank=True,
                                     help_text="{reward name: {faults, disabled, error, step}} from the sandbox.")
    sandbox_weak = models.JSONField(default=dict, blank=True,
                                    help_text="{reward name: [what its sandbox lacked]} for rewards that ran in weak "
                                              "mode (GRPO_SANDBOX_ALLOW_WEAK).")
    evaluation = models.JSONField(default=dict, blank=True,
                                  help_text="Periodic evaluation settings (workers.config.EvalFields); {}: none.")
    reflection_phrases = models.JSONField(default=default_reflection_phrases, blank=True,
                                          help_text="Self-reflection phrases tagged at ingest; /.../ is a regex.")
    detector_thresholds = models.JSONField(default=dict, blank=True,
                                           help_text="The reward-hacking detectors' thresholds this run changed "
                                                     "(runs.rollouts.detectors.DEFAULTS holds the rest).")
    token_sample_groups = models.SmallIntegerField(
        default=1, help_text="Groups of each generation batch whose per-token values (TRL's log-probabilities, "
                             "entropy, ratio, clipping) are kept in <run_dir>/tokens; -1: all, 0: none.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = SharedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["ray_slot_base"], condition=models.Q(lease__isnull=False),
                                               name="run_ray_slots_one_live_run")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("run_detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0

    @property
    def run_dir(self):
        return settings.DATA_DIR / "runs" / str(self.uid)

    @property
    def is_sft(self) -> bool:
        return self.kind == self.Kind.SFT

    @property
    def reward_names(self) -> list[str]:
        """The run's reward columns in TRL's order: its reward functions, then its environment's get_reward
        (named after the class), where it has one."""
        return [r["name"] for r in self.rewards] + ([self.environment["reward"]] if (self.environment or {}).get(
            "reward") else [])

    @property
    def vllm_server(self) -> bool:
        """TRL's vLLM server mode: the worker starts the server on a GPU of its own, apart from training's."""
        return bool((self.config or {}).get("use_vllm")) and (self.config or {}).get("vllm_mode") == "server"

    @property
    def gpus_needed(self) -> int:
        """The GPUs a worker must have for this run: the training GPUs, and one more for a vLLM server."""
        return self.requested_gpus + (1 if self.vllm_server and self.requested_gpus > 0 else 0)

    def mark_running(self):
        self.status, self.started_at = self.Status.RUNNING, timezone.now()
        self.save(update_fields=["status", "started_at"])

    # An attempt that ends gives up its lease: no supervisor may change the run after that.

    def mark_completed(self):
        self.status, self.finished_at, self.lease = self.Status.COMPLETED, timezone.now(), None
        self.save(update_fields=["status", "finished_at", "lease"])

    def mark_cancelled(self):
        # a run stopped on purpose after a checkpoint can go on from there later
        self.resumable = self.checkpoint_step > 0
        self.status, self.finished_at, self.lease = self.Status.CANCELLED, timezone.now(), None
        self.save(update_fields=["status", "finished_at", "resumable", "lease"])

    def mark_failed(self, error: str, log_tail: str = ""):
        # a failure with a checkpoint behind it can continue from there
        self.resumable = self.checkpoint_step > 0
        self.status, self.error, self.log_tail, self.finished_at = self.Status.FAILED, error, log_tail, timezone.now()
        self.lease = None
        self.save(update_fields=["status", "error", "log_tail", "finished_at", "resumable", "lease"])


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


class Rollout(models.Model):
    """One completion of one generation batch, with TRL's per-function rewards and advantage. Key: (run, step, index)."""

    # No index of its own: the key (run, step, index) and the indexes below all start with run. No database
    # constraint either: checking it row by row costs the ingest a quarter of its speed (bench/ingest.py), rows come
    # only from the ingest of an existing run, and deleting a run still deletes its rollouts (Django, one DELETE).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="rollouts", db_index=False,
                            db_constraint=False)
    step = models.PositiveIntegerField()
    index = models.PositiveIntegerField(help_text="Position in the generation batch.")
    group = models.PositiveIntegerField(help_text="index // num_generations: completions of the same prompt.")
    prompt = models.TextField()
    prompt_key = models.CharField(max_length=16, default="", help_text="A hash of the prompt: one prompt across steps.")
    completion = models.TextField()
    rewards = models.JSONField(help_text="Per reward function, in the run's order; None where the function abstained.")
    reward = models.FloatField(null=True, help_text="Weighted sum of the per-function rewards.")
    reward_bucket = models.SmallIntegerField(null=True, help_text="reward_bucket(reward): the browser reads rollouts "
                                                                  "in advantage order bucket by bucket.")
    advantage = models.FloatField()
    length = models.PositiveIntegerField(help_text="Completion length in tokens.")
    truncated = models.BooleanField(default=False)
    zero_std = models.BooleanField(default=False, help_text="Its group's rewards were all equal: no learning signal.")
    reflections = models.JSONField(default=list, help_text="Self-reflection phrases found in the completion.")
    reflective = models.BooleanField(default=False, help_text="Holds at least one self-reflection phrase.")
    reflection_mask = models.BigIntegerField(default=0, help_text="Bit i set: the run's phrase i was found. Kept in "
                                                                  "the browser's index, so filtering on a phrase "
                                                                  "reads no row it does not keep.")
    columns = models.JSONField(default=dict, help_text="The dataset row's other columns, as the rewards saw them.")
    messages = models.JSONField(null=True, blank=True,
                                help_text="A conversational completion as TRL produced it: its turns, the tool calls "
                                          "(name, arguments) and the tools' results. None for plain text.")
    step_scores = models.JSONField(null=True, blank=True,
                                   help_text="Per-step (process) scores a reward logged through TRL's log_extra: "
                                             "{split: the delimiter, scores: [a number or None per step]}.")
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
            models.Index(fields=["run", "reward_bucket", "advantage", "id", "reward", "step", "length", "zero_std",
                                 "reflective", "truncated", "reflection_mask"], name="rollout_run_advantage"),
            models.Index(fields=["run", "prompt_key", "step"], name="rollout_run_prompt"),
        ]


class Evaluation(models.Model):
    """One evaluation of one model on a dataset version's eval prompts: k samples and one greedy completion per prompt,
    scored by the run's reward functions (workers.evaluate). Periodic ones come from the training run itself (one
    per evaluated step); standalone ones are jobs a user starts on the run page (the base model, a checkpoint, the
    final model, any model folder)."""

    class Kind(models.TextChoices):
        PERIODIC = "periodic"
        STANDALONE = "standalone"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"  # a recipe cancelled while it ran (runs.evaluations.services.evaluation_cancel)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="evaluations")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    step = models.PositiveIntegerField(null=True, blank=True,
                                       help_text="Periodic: the training step evaluated. A checkpoint: its step.")
    label = models.CharField(max_length=200, help_text="'step 4', 'base model', 'final model', 'checkpoint-10', ...")
    model = models.CharField(max_length=500, blank=True, help_text="The model folder or hub id evaluated.")
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="evaluations")
    split = models.CharField(max_length=8, default="eval", help_text="'eval': the eval split; 'all': every row.")
    settings = models.JSONField(default=dict, help_text="workers.config.EvalFields as used.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    k = models.PositiveSmallIntegerField(default=0)
    solved_by = models.CharField(max_length=200, blank=True, help_text="The reward that decided correctness.")
    threshold = models.FloatField(default=1.0)
    prompts = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(default=dict, help_text="mean@k, pass@k, maj@k, greedy, reward_mean@k, ...")
    seconds = models.FloatField(null=True, blank=True, help_text="Generation and scoring time.")
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["kind", "step", "created_at"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], condition=models.Q(kind="periodic"),
                                               name="evaluation_periodic_step")]

    def __str__(self):
        return f"{self.run.name}: {self.label}"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.COMPLETED, self.Status.FAILED, self.Status.CANCELLED)

    @property
    def eval_dir(self):
        return self.run.run_dir / "evaluations" / str(self.pk)


class Replay(models.Model):
    """A reward replay: a run's stored completions of some steps re-scored by other reward versions or weights, with
    the rewards and advantages TRL's formula gives them (runs.rollouts.replay); run by a task on the sandbox queue."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="replays")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="replays")
    rewards = models.JSONField(help_text="[{name, weight, version_id | builtin}] in the run's order, as replayed.")
    filters = models.JSONField(default=dict, blank=True, help_text="The rollout browser's filters that chose the steps.")
    steps = models.JSONField(default=list, help_text="The steps replayed (every completion of each).")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0, help_text="Completions re-scored so far.")
    total = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True,
                               help_text="Per step: zero-variance shares before/after, groups whose best changed.")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

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


class EvalSample(models.Model):
    """One completion of an evaluation: sample 0..k-1 of a prompt, or its greedy completion (sample k)."""

    evaluation = models.ForeignKey(Evaluation, on_delete=models.CASCADE, related_name="samples")
    prompt_index = models.PositiveIntegerField()
    sample = models.PositiveSmallIntegerField()
    greedy = models.BooleanField(default=False)
    prompt = models.TextField()
    prompt_key = models.CharField(max_length=16, default="")
    completion = models.TextField()
    rewards = models.JSONField(help_text="Per reward function, in the run's order; None where it abstained.")
    reward = models.FloatField(null=True)
    correct = models.BooleanField(default=False)
    answer = models.CharField(max_length=200, blank=True, help_text="The extracted answer maj@k votes on.")
    length = models.PositiveIntegerField()
    truncated = models.BooleanField(default=False)
    columns = models.JSONField(default=dict)

    class Meta:
        ordering = ["prompt_index", "sample"]
        constraints = [models.UniqueConstraint(fields=["evaluation", "prompt_index", "sample"],
                                               name="eval_sample_key")]


class ResourceSample(models.Model):
    """What the training process used at one moment, sampled by the worker: CPU and memory of the process tree,
    and per GPU its utilisation and memory where there are GPUs."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="resource_samples")
    at = models.DateTimeField()
    step = models.PositiveIntegerField(default=0)
    cpu_percent = models.FloatField(help_text="Of one core: 200 is two cores busy.")
    rss_bytes = models.BigIntegerField()
    gpus = models.JSONField(default=list, help_text="[{index, util, mem_used, mem_total}] (bytes, %).")

    class Meta:
        ordering = ["at"]
        indexes = [models.Index(fields=["run", "at"], name="resource_run_at")]


class Worker(models.Model):
    """A Celery worker that announced itself: what it can run (GPUs, vLLM) and when it was last seen. Written by
    workers.registry; read when a run asks for GPUs or vLLM, and by the workers page."""

    ONLINE_SECONDS = 120  # a worker heard from within this long is online (its heartbeat beats far more often)

    name = models.CharField(max_length=200, unique=True, help_text="Celery node name, e.g. gpu@host.")
    hostname = models.CharField(max_length=200)
    queues = models.JSONField(default=list)
    gpus = models.JSONField(default=list, help_text="[{index, name, memory_mb}] as torch.cuda reports them.")
    vllm = models.BooleanField(default=False, help_text="vLLM is importable on this worker.")
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()

    class Meta:
        db_table = "workers_worker"  # created by the workers app before the model moved here (runs 0008)
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def online(self) -> bool:
        return (timezone.now() - self.last_seen).total_seconds() < self.ONLINE_SECONDS


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
    cancel, as their owner could in a browser."""

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"

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


class RejectionJob(models.Model):
    """Rejection sampling (R1's stage 3): k completions per prompt of a dataset version from any model, scored by
    reward functions in the sandbox; those at or above a threshold (at most m per prompt, deduplicated), with rows of
    another dataset mixed in if asked, become a new SFT dataset version that records where it came from. Visible to
    its owner only."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"  # runs.sampling.services.rejection_job_cancel

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rejection_jobs")
    name = models.CharField(max_length=200)
    model = models.CharField(max_length=500, help_text="The model sampled: 'tiny', a folder, or a hub id.")
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="+",
                                        help_text="The prompts.")
    split = models.CharField(max_length=8, default="all", help_text="'train', 'eval' or 'all' rows of the version.")
    rewards = models.JSONField(help_text="[{name, weight, version_id, version}] that score the samples.")
    settings = models.JSONField(help_text="k, temperature, max_new_tokens, max_prompts, solved_by, threshold, "
                                          "max_per_prompt, mix_rows, seed.")
    mix_version = models.ForeignKey(DatasetVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                                    help_text="Rows mixed into the output (prompt-completion), if any.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    stats = models.JSONField(default=dict, blank=True, help_text="prompts, samples, kept, duplicates, mixed_in, "
                                                                 "kept_share, kept_share_per_prompt.")
    output_version = models.ForeignKey(DatasetVersion, null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("rejection_job_detail", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.COMPLETED, self.Status.FAILED, self.Status.CANCELLED)

    @property
    def job_dir(self):
        return settings.DATA_DIR / "rejection" / str(self.pk)

    def mark_failed(self, error: str, log_tail: str = ""):
        """Failed, unless it was cancelled meanwhile (a cancelled job's process ends with an error of its own)."""
        with transaction.atomic():
            if RejectionJob.objects.select_for_update().filter(pk=self.pk, status=self.Status.CANCELLED).exists():
                return
            self.status, self.error, self.log_tail, self.finished_at = \
                self.Status.FAILED, error, log_tail, timezone.now()
            self.save(update_fields=["status", "error", "log_tail", "finished_at"])


class RejectionSample(models.Model):
    """One sampled completion of a rejection-sampling job, with its rewards and whether it was kept."""

    job = models.ForeignKey(RejectionJob, on_delete=models.CASCADE, related_name="samples")
    prompt_index = models.PositiveIntegerField()
    sample = models.PositiveSmallIntegerField()
    prompt = models.TextField()
    completion = models.TextField()
    rewards = models.JSONField(help_text="Per reward function, in the job's order; None where it abstained.")
    reward = models.FloatField(null=True)
    passed = models.BooleanField(default=False, help_text="At or above the threshold.")
    duplicate = models.BooleanField(default=False, help_text="Passed, but the same text as a kept one.")
    kept = models.BooleanField(default=False, help_text="In the output dataset.")
    length = models.PositiveIntegerField(default=0)
    truncated = models.BooleanField(default=False)
    columns = models.JSONField(default=dict)

    class Meta:
        ordering = ["prompt_index", "sample"]
        constraints = [models.UniqueConstraint(fields=["job", "prompt_index", "sample"], name="rejection_sample_key")]


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
    outputs = models.JSONField(default=list, help_text="Per stage: {run, job, evaluation, model, dataset_version, "
                                                       "status, figures}.")
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
