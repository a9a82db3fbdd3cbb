"""The training run (runs.lifecycle): what it trains, where it stands, and the attempt that holds it."""

import uuid

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property

from grpo_web.sharing import SharedQuerySet
from runs.models.datasets import DatasetVersion
from runs.models.fields import ExactJSONField
from runs.models.jobs import Job, JobStatus
from runs.phrases import default_reflection_phrases


class RunStatus(models.TextChoices):
    """A job's statuses (JobStatus, the same values), and before them a run's own: its rewards being checked in the
    sandbox (runs.lifecycle.services.run_create) before it is queued or refused."""

    CHECKING = "checking", "checking rewards"
    QUEUED = JobStatus.QUEUED.value
    RUNNING = JobStatus.RUNNING.value
    COMPLETED = JobStatus.COMPLETED.value
    FAILED = JobStatus.FAILED.value
    CANCELLED = JobStatus.CANCELLED.value


class Run(Job):
    Status = RunStatus
    WAITING = (RunStatus.CHECKING, RunStatus.QUEUED)
    # a supervisor writes its heartbeat every second: this long without one, the page says it is not responding, and
    # the reaper fails the run once nothing holds its folder any more
    SILENT_SECONDS = 10
    # three missed heartbeats: the step a page shows is said to be as of the last one (a paused, busy or dead
    # supervisor ingests nothing), and a run whose supervisor is dead is failed by the reaper
    STALE_SECONDS = 3
    # an attached run's client beats every 10 s while it trains: this long without a word, its page says contact is lost
    LOST_SECONDS = 60

    class Kind(models.TextChoices):
        GRPO = "grpo", "GRPO"
        SFT = "sft", "SFT"

    class Origin(models.TextChoices):
        APP = "app", "trained by grpo-web"
        ATTACHED = "attached", "trained elsewhere, attached"
        IMPORTED = "imported", "trained elsewhere, imported"

    class Trainer(models.TextChoices):
        TRL = "trl", "TRL"
        VERL = "verl", "verl"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    trainer = models.CharField(
        max_length=8,
        choices=Trainer.choices,
        default=Trainer.TRL,
        help_text="trl: TRL's trainer in one process (per GPU); verl: verl's GRPO on Ray with "
        "vLLM rollout (GPU workers), the same config translated to its keys.",
    )
    kind = models.CharField(
        max_length=8,
        choices=Kind.choices,
        default=Kind.GRPO,
        help_text="grpo: TRL's GRPOTrainer; sft: TRL's SFTTrainer (config holds SFTConfig fields, "
        "rewards only score its evaluations).",
    )
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False, help_text="Names the run's folder.")
    name = models.CharField(max_length=200)
    model = models.CharField(max_length=500, help_text="Local path or Hugging Face hub id.")
    dataset_version = models.ForeignKey(
        DatasetVersion,
        on_delete=models.PROTECT,
        related_name="runs",
        null=True,
        blank=True,
        help_text="The data the run trains on; a run trained elsewhere has none (dataset_label names its data).",
    )
    origin = models.CharField(
        max_length=8,
        choices=Origin.choices,
        default=Origin.APP,
        db_index=True,
        help_text="app: trained by grpo-web; attached: a client in the user's own training script sends it "
        "(runs.attach); imported: made from files a training framework wrote.",
    )
    dataset_label = models.CharField(
        max_length=500, blank=True, help_text="A run trained elsewhere: the dataset name its source reported."
    )
    reported_host = models.TextField(blank=True, help_text="A run trained elsewhere: the host its source reported.")
    reported_command = models.TextField(
        blank=True, help_text="A run trained elsewhere: the command line its source reported."
    )
    last_contact_at = models.DateTimeField(
        null=True, blank=True, help_text="An attached run: when its client last sent anything."
    )
    received_bytes = models.BigIntegerField(
        default=0, help_text="An attached run: bytes of its client's spool (event log) taken so far."
    )
    resume_key_hash = models.CharField(
        max_length=64, blank=True, help_text="An attached run: sha256 of the key its client resumes it with."
    )
    rewards = models.JSONField(help_text="[{name, builtin, weight}] as used by the training program.")
    tools = models.JSONField(
        default=list,
        blank=True,
        help_text="[{name, builtin} or {name, version_id}]: functions the model may call as it "
        "generates (TRL's tools), run in the sandbox.",
    )
    environment = models.JSONField(
        default=dict,
        blank=True,
        help_text="{name, builtin} or {name, version_id}, or {} for none: an environment "
        "class whose methods the model calls (TRL's environment_factory), one "
        "instance per rollout, run in the sandbox.",
    )
    config = ExactJSONField(help_text="GRPOConfig (an SFT run: SFTConfig) fields under TRL's names.")
    config_extra = models.JSONField(
        default=dict, blank=True, help_text="Further GRPOConfig fields from an imported TRL config, passed through."
    )
    config_sources = models.JSONField(
        default=dict,
        blank=True,
        help_text="Each config field: where its value came from: 'file' (the imported file), 'form' (the run form), "
        "'trainer default' (left out: TRL's default) or 'grpo-web' (left out: grpo-web's own default).",
    )
    provenance = ExactJSONField(
        default=dict,
        blank=True,
        help_text="The reproducibility record of the run's latest attempt (grpo_web_attach.provenance): library "
        "versions, accelerator and driver, the app's and script's git state, host, command and seed; {} until the "
        "training process (or the attach client) reports it.",
    )
    import_notes = models.JSONField(
        default=list,
        blank=True,
        help_text="What the config import did with keys it did not take as they are, each naming the key and why; "
        "kept for the run's life (the run page's Config tab).",
    )
    # Job's status, indexed: the dashboard, the reaper and the dispatcher select runs by it
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    queue_anyway = models.BooleanField(
        default=False,
        help_text="Started with 'queue anyway': not refused for want of an online worker with its GPUs, vLLM or Ray.",
    )
    refusal = models.JSONField(
        default=list,
        blank=True,
        help_text="Why the check before queueing refused the run (each message naming its field); [] when it did not.",
    )
    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    event_offset = models.BigIntegerField(default=0, help_text="Bytes of the event log already ingested.")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="clones",
        help_text="The run this one was cloned or retried from.",
    )
    requested_gpus = models.PositiveSmallIntegerField(default=0, help_text="GPUs the run needs; 0 runs on a CPU.")
    engine = models.CharField(
        max_length=8,
        choices=[("local", "local"), ("ray", "Ray")],
        default="local",
        help_text="local: a worker trains on its own machine; ray: the worker submits the run "
        'to its Ray cluster (RAY_ADDRESS) as a Ray job (README "Scale out").',
    )
    num_workers = models.PositiveSmallIntegerField(
        default=1,
        help_text="Ray Train workers of a Ray run (DDP across them; each gets one GPU when the run asks for GPUs).",
    )
    ray_slot_base = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="A Ray run's first sandbox slot on the cluster's nodes, held while an attempt runs (its lease is "
        "set): no two live Ray runs hold the same range (workers.placement.ray_slot_base).",
    )
    worker_name = models.CharField(max_length=200, blank=True, help_text="The Celery worker that took the run.")
    attempt = models.PositiveSmallIntegerField(default=1, help_text="1, then +1 for each resume.")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from the supervisor.")
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    checkpoint_step = models.PositiveIntegerField(default=0, help_text="Step of the last checkpoint saved.")
    resumable = models.BooleanField(default=False, help_text="Failed or cancelled with a checkpoint to resume from.")
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When this attempt was last put in the queue.")
    lease = models.UUIDField(
        null=True,
        blank=True,
        editable=False,
        help_text="The token of the supervisor that holds the current attempt; cleared when the "
        "attempt is taken from it (reaped), so a late supervisor can change nothing.",
    )
    reward_faults = models.JSONField(
        default=dict, blank=True, help_text="{reward name: {faults, disabled, error, step}} from the sandbox."
    )
    sandbox_weak = models.JSONField(
        default=dict,
        blank=True,
        help_text="{reward name: [what its sandbox lacked]} for rewards that ran in weak "
        "mode (GRPO_SANDBOX_ALLOW_WEAK).",
    )
    evaluation = models.JSONField(
        default=dict,
        blank=True,
        help_text="Periodic evaluation settings (grpo_web_protocol.config.EvalFields); {}: none.",
    )
    reflection_phrases = models.JSONField(
        default=default_reflection_phrases,
        blank=True,
        help_text="Self-reflection phrases tagged at ingest; /.../ is a regex.",
    )
    detector_thresholds = models.JSONField(
        default=dict,
        blank=True,
        help_text="The reward-hacking detectors' thresholds this run changed "
        "(runs.rollouts.detectors.DEFAULTS holds the rest).",
    )
    token_sample_groups = models.SmallIntegerField(
        default=1,
        help_text="Groups of each generation batch whose per-token values (TRL's log-probabilities, "
        "entropy, ratio, clipping) are kept in <run_dir>/tokens; -1: all, 0: none.",
    )
    started_at = models.DateTimeField(null=True, blank=True)
    tags = models.CharField(
        max_length=300,
        blank=True,
        help_text="Short labels, separated by commas (runs.lifecycle.services.run_annotate checks them); the "
        "dashboard's search matches them.",
    )
    notes = models.TextField(blank=True, help_text="The owner's notes on the run; the dashboard's search matches them.")
    pinned_metric = models.CharField(
        max_length=200, blank=True, help_text="The metric whose curve the run page's Overview shows beside the reward."
    )

    objects = SharedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["ray_slot_base"], condition=models.Q(lease__isnull=False), name="run_ray_slots_one_live_run"
            )
        ]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("run_detail", args=[self.pk])

    @property
    def progress(self) -> float:
        return min(1.0, self.step / self.total_steps) if self.total_steps else 0.0

    @property
    def run_dir(self):
        return settings.DATA_DIR / "runs" / str(self.uid)

    @property
    def tag_list(self) -> list[str]:
        return [t for t in self.tags.split(", ") if t]

    @property
    def status_label(self) -> str:
        """The status as the pages say it: "checking rewards" for a run whose rewards are being checked."""
        return "checking rewards" if self.status == RunStatus.CHECKING else self.status

    @property
    def is_external(self) -> bool:
        """Trained elsewhere (attached or imported): no supervisor, no dataset version, no config to queue."""
        return self.origin != self.Origin.APP

    @property
    def lost_contact(self) -> bool:
        """An attached run still running whose client has sent nothing (not even a heartbeat) for LOST_SECONDS."""
        return (
            self.origin == self.Origin.ATTACHED
            and self.status == JobStatus.RUNNING
            and self.last_contact_at is not None
            and (timezone.now() - self.last_contact_at).total_seconds() > self.LOST_SECONDS
        )

    @property
    def dataset_name(self) -> str:
        """What the run trained on, as a page shows it: the dataset version, or the name its source reported."""
        return str(self.dataset_version) if self.dataset_version_id else self.dataset_label

    @property
    def is_sft(self) -> bool:
        return self.kind == self.Kind.SFT

    @cached_property
    def imported_from(self):
        """An imported run's RunImport (what its files held); None for any other run."""
        if self.origin != self.Origin.IMPORTED:
            return None
        try:
            return self.run_import
        except ObjectDoesNotExist:
            return None

    @property
    def unknown_reason(self) -> str:
        """Why a setting the run's config lacks is unknown, as its pages say it."""
        if self.origin == self.Origin.IMPORTED:
            return "not in the files this run was imported from"
        if self.origin == self.Origin.ATTACHED:
            return "not reported by the script's client"
        return "not in this run's config"

    @property
    def lengths_known(self) -> bool:
        """Completion lengths are token counts: not for an import whose files hold none (TRL's completions tables,
        a verl dump without them), whose rows store 0."""
        return self.imported_from is None or self.imported_from.length_known

    @property
    def advantages_by(self) -> str:
        """Who computed the stored advantages: TRL, verl, or grpo-web with verl's GRPO estimator (a verl dump holds
        none, so the import computed them from the scores)."""
        if self.imported_from is not None and self.imported_from.advantage_computed:
            return "grpo-web, with verl's GRPO estimator"
        if self.trainer == self.Trainer.VERL or (self.imported_from and self.imported_from.source == "verl"):
            return "verl"
        return "TRL"

    @property
    def advantage_epsilon(self) -> float:
        """What the std is padded with in the advantage: TRL's 1e-4, verl's GRPO estimator's 1e-6."""
        return 1e-4 if self.advantages_by == "TRL" else 1e-6

    @property
    def reward_names(self) -> list[str]:
        """The run's reward columns in TRL's order: its reward functions, then its environment's get_reward
        (named after the class), where it has one."""
        return [r["name"] for r in self.rewards] + (
            [self.environment["reward"]] if (self.environment or {}).get("reward") else []
        )

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
