"""The training config: TRL GRPOConfig (and, for SFT runs, SFTConfig) field names, typed, with help text.

Stored with the run (as JSON) and written next to the event log and every checkpoint. No Django here: the web form
builds its fields from :data:`GRPO_FIELDS` or :data:`SFT_FIELDS`, and the training program turns the config into a
``GRPOConfig`` or an ``SFTConfig``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

# transformers' SchedulerType values: the learning-rate schedules GRPOConfig and SFTConfig take
LR_SCHEDULERS = (
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "constant",
    "constant_with_warmup",
    "inverse_sqrt",
    "reduce_lr_on_plateau",
    "cosine_with_min_lr",
    "cosine_warmup_with_min_lr",
    "warmup_stable_decay",
    "greedy",
)


def _f(default, help_text: str, group: str, **extra):
    return field(default=default, metadata={"help": help_text, "group": group, **extra})


# transformers' max_steps: -1 (or 0) trains num_train_epochs (3 by default) over the training rows
MAX_STEPS_HELP = (
    -1,
    "Optimizer steps to train for; -1: TRL's default, num_train_epochs (3 unless the run passes another) over the "
    "training rows, worked out as steps when the run is created.",
)

# TRL documents GRPOConfig in these groups; the run form shows them in this order.
GROUPS = ["generation", "vllm", "loss", "rewards", "training", "peft", "logging"]
# the LoRA fields, under TRL's ModelConfig names: they build TRL's peft_config, not GRPOConfig fields
PEFT_FIELDS = ("use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")


@dataclass
class GRPOFields:
    """The GRPOConfig fields a run sets, under TRL's own names. Each default is TRL's (GRPOConfig's, TrainingArguments'
    or, for LoRA, ModelConfig's), except the few in :data:`GRPO_WEB_DEFAULTS`, which say why; the demo's small values
    live in its own templates (runs.lifecycle.demos). ``None`` means "TRL's default" for optional fields."""

    # generation
    num_generations: int = _f(
        8, "Completions sampled per prompt (G); the group is its own baseline.", "generation", min=2
    )
    max_completion_length: int = _f(512, "Maximum tokens generated per completion.", "generation", min=1)
    temperature: float = _f(1.0, "Sampling temperature for generation.", "generation", min=0.0)
    top_p: float = _f(
        1.0, "Nucleus sampling: keep the smallest token set with this much probability.", "generation", min=0.0
    )
    top_k: int = _f(0, "Sample among the k most likely tokens; 0 disables it.", "generation", min=0)
    repetition_penalty: float = _f(1.0, "Penalty on repeated tokens; 1.0 is none.", "generation", min=0.0)
    steps_per_generation: int | None = _f(
        None, "Optimizer steps per generation batch (defaults to gradient_accumulation_steps).", "generation", min=1
    )
    # vLLM
    use_vllm: bool = _f(
        False, "Generate with vLLM (GPU workers with vLLM; CPU workers with its CPU build, colocate mode).", "vllm"
    )
    vllm_mode: str = _f(
        "colocate",
        "'colocate': vLLM inside the trainer process; 'server': a TRL vLLM server the worker starts on a spare GPU.",
        "vllm",
        choices=("colocate", "server"),
    )
    vllm_gpu_memory_utilization: float = _f(0.3, "Share of GPU memory vLLM may take (colocate mode).", "vllm", min=0.0)
    # loss
    beta: float = _f(0.0, "KL coefficient against the reference model; 0 skips the reference model.", "loss", min=0.0)
    epsilon: float = _f(0.2, "Lower clipping range of the policy ratio.", "loss", min=0.0)
    epsilon_high: float | None = _f(
        None, "Upper clipping range (DAPO's clip-higher); defaults to epsilon.", "loss", min=0.0
    )
    loss_type: str = _f(
        "dapo",
        "Loss formulation: how token losses are normalised and clipped (TRL's loss_type).",
        "loss",
        choices=("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    )
    num_iterations: int = _f(1, "Optimisation passes per generation batch (μ in the GRPO paper).", "loss", min=1)
    importance_sampling_level: str = _f(
        "token", "Importance ratios per token, or per sequence (GSPO).", "loss", choices=("token", "sequence")
    )
    mask_truncated_completions: bool = _f(
        False, "Leave completions cut off at max_completion_length out of the loss.", "loss"
    )
    # rewards
    scale_rewards: str = _f(
        "group",
        "Divide advantages by the std of the group, of the batch, or not at all.",
        "rewards",
        choices=("group", "batch", "none"),
    )
    multi_objective_aggregation: str = _f(
        "sum_then_normalize",
        "Combine the reward functions before or after normalising each.",
        "rewards",
        choices=("sum_then_normalize", "normalize_then_sum"),
    )
    # training
    learning_rate: float = _f(1e-6, "AdamW learning rate.", "training", min=0.0)
    max_steps: int = _f(MAX_STEPS_HELP[0], MAX_STEPS_HELP[1], "training", min=-1)
    per_device_train_batch_size: int = _f(
        8, "Completions per device per step; a multiple of num_generations.", "training", min=1
    )
    gradient_accumulation_steps: int = _f(1, "Micro-batches per optimizer step.", "training", min=1)
    lr_scheduler_type: str = _f(
        "linear",
        "Learning-rate schedule (transformers' SchedulerType; its arguments, such "
        "as min_lr_rate, go in lr_scheduler_kwargs).",
        "training",
        choices=LR_SCHEDULERS,
    )
    max_grad_norm: float = _f(1.0, "Gradient clipping norm.", "training", min=0.0)
    weight_decay: float = _f(0.0, "AdamW weight decay.", "training", min=0.0)
    bf16: str = _f(
        "auto",
        "bfloat16 training: 'auto' uses it where the GPU supports it.",
        "training",
        choices=("auto", "yes", "no"),
    )
    gradient_checkpointing: bool = _f(True, "Trade compute for memory.", "training")
    seed: int = _f(42, "Random seed: the same seed gives the same run.", "training")
    # LoRA (TRL's ModelConfig names; PEFT's LoraConfig)
    use_peft: bool = _f(
        False,
        "Train LoRA adapters instead of every weight (TRL's peft_config); the final model "
        "is saved merged, and the adapter beside it.",
        "peft",
    )
    lora_r: int = _f(16, "LoRA rank.", "peft", min=1)
    lora_alpha: int = _f(32, "LoRA alpha: the update is scaled by alpha / r.", "peft", min=1)
    lora_dropout: float = _f(0.05, "Dropout on the LoRA path.", "peft", min=0.0)
    lora_target_modules: str = _f(
        "all-linear", "Modules that get adapters: 'all-linear', or names separated by commas (q_proj,v_proj).", "peft"
    )
    # logging and checkpoints
    save_steps: int = _f(
        500, "Save a checkpoint every N steps (resume continues from the last); 0 saves none.", "logging", min=0
    )
    save_total_limit: int = _f(2, "Checkpoints kept on disk.", "logging", min=1)
    log_completions: bool = _f(False, "Also write TRL's own completions table (parquet) every logged step.", "logging")


GRPO_FIELDS = {f.name: f for f in dataclasses.fields(GRPOFields)}


@dataclass
class EvalFields:
    """Held-out evaluation during a run (workers.training.evaluate), on the dataset version's eval split. Not GRPOConfig
    fields: TRL's own evaluation samples num_generations per prompt and knows no pass@k, so grpo-web runs its own."""

    eval_steps: int = _f(
        0,
        "Evaluate on the eval split every N steps (and before the first and after the last); "
        "0: no periodic evaluation.",
        "evaluation",
        min=0,
    )
    eval_num_samples: int = _f(
        4, "k: sampled completions per eval prompt (mean@k, pass@k, maj@k), plus one greedy.", "evaluation", min=1
    )
    eval_max_prompts: int = _f(
        32, "Eval prompts used (the first rows of the eval split); 0: all of them.", "evaluation", min=0
    )
    eval_temperature: float = _f(1.0, "Sampling temperature of the k samples.", "evaluation", min=0.0)
    eval_max_new_tokens: int = _f(
        0, "Tokens generated per eval completion; 0: the run's max_completion_length.", "evaluation", min=0
    )
    eval_solved_by: str = _f(
        "",
        "The reward that decides a correct completion: a reward function's name, or "
        "'reward' for the weighted total. Blank: 'accuracy' if the run has it, else the total.",
        "evaluation",
    )
    eval_threshold: float = _f(1.0, "A completion is correct when that reward is at least this.", "evaluation")


EVAL_FIELDS = {f.name: f for f in dataclasses.fields(EvalFields)}

# TRL documents SFTConfig in these groups; the SFT run form shows them in this order.
SFT_GROUPS = ["data", "loss", "training", "logging"]


@dataclass
class SFTFields:
    """The SFTConfig fields an SFT run sets, under TRL's own names. Each default is SFTConfig's, except those in
    :data:`GRPO_WEB_DEFAULTS`; the demo's small values live in its own templates (runs.lifecycle.demos). ``None``
    means "TRL's default" for optional fields."""

    # data
    max_length: int | None = _f(
        1024, "Tokenize to at most this many tokens (prompt and completion); longer rows are truncated.", "data", min=1
    )
    packing: bool = _f(False, "Pack several rows into each sequence of max_length.", "data")
    # loss
    completion_only_loss: bool | None = _f(
        None,
        "Prompt-completion rows: train on the completion tokens only (blank: TRL decides, which is yes for them).",
        "loss",
    )
    assistant_only_loss: bool = _f(
        False,
        "Conversational rows: train on the assistant's messages only (the model's chat template must mark them).",
        "loss",
    )
    loss_type: str = _f(
        "nll",
        "Negative log-likelihood, or DFT (each token's loss weighted by its probability).",
        "loss",
        choices=("nll", "dft"),
    )
    # training
    learning_rate: float = _f(2e-5, "AdamW learning rate.", "training", min=0.0)
    max_steps: int = _f(MAX_STEPS_HELP[0], MAX_STEPS_HELP[1], "training", min=-1)
    per_device_train_batch_size: int = _f(8, "Rows per device per step.", "training", min=1)
    gradient_accumulation_steps: int = _f(1, "Micro-batches per optimizer step.", "training", min=1)
    lr_scheduler_type: str = _f(
        "linear", "Learning-rate schedule (transformers' SchedulerType).", "training", choices=LR_SCHEDULERS
    )
    warmup_steps: int = _f(0, "Steps of linear warmup.", "training", min=0)
    max_grad_norm: float = _f(1.0, "Gradient clipping norm.", "training", min=0.0)
    weight_decay: float = _f(0.0, "AdamW weight decay.", "training", min=0.0)
    bf16: str = _f(
        "auto",
        "bfloat16 training: 'auto' uses it where the GPU supports it.",
        "training",
        choices=("auto", "yes", "no"),
    )
    gradient_checkpointing: bool = _f(True, "Trade compute for memory.", "training")
    seed: int = _f(42, "Random seed: the same seed gives the same run.", "training")
    # logging and checkpoints
    save_steps: int = _f(
        500, "Save a checkpoint every N steps (resume continues from the last); 0 saves none.", "logging", min=0
    )
    save_total_limit: int = _f(2, "Checkpoints kept on disk.", "logging", min=1)


SFT_FIELDS = {f.name: f for f in dataclasses.fields(SFTFields)}
SFT_COLUMNS = ("completion", "messages")

# Where each value of a run's config came from (Run.config_sources; the run page's Config tab and the YAML export show it)
FROM_FILE = "file"  # the imported file (a TRL, open-r1, verl or Oumi config, a run YAML, an API body) set it
FROM_FORM = "form"  # set on the run form
FROM_TRAINER = "trainer default"  # left out: TRL's default for it (GRPOConfig's, SFTConfig's, TrainingArguments')
FROM_GRPO_WEB = "grpo-web"  # left out: grpo-web's own default, one of GRPO_WEB_DEFAULTS
SOURCES = (FROM_FILE, FROM_FORM, FROM_TRAINER, FROM_GRPO_WEB)

# The few defaults that are grpo-web's and not TRL's, each with why
GRPO_WEB_DEFAULTS = {
    "bf16": "grpo-web's 'auto' trains in bfloat16 where the GPU supports it; TRL's default turns it on everywhere, "
    "CPU workers too",
    "save_total_limit": "grpo-web keeps the last 2 checkpoints so a long run does not fill its worker's disk; TRL "
    "keeps every one",
    "lora_target_modules": "grpo-web's 'all-linear' puts adapters on every linear layer; TRL's ModelConfig leaves it "
    "to PEFT, which knows the modules of some architectures only",
}


def default_source(name: str) -> str:
    """Where the default of a config field comes from: TRL's, or grpo-web's own."""
    return FROM_GRPO_WEB if name in GRPO_WEB_DEFAULTS else FROM_TRAINER


def config_sources(kind: str, given: dict) -> dict:
    """Each config field of ``kind``: where its value came from. ``given``: the sources of the fields someone set
    (the file's or the form's); every other field took its default."""
    return {
        name: given.get(name) or default_source(name) for name in kind_fields(kind)
    }  # what an SFT run trains on, written to its training file beside the prompt


# A run's kind: which trainer, which config dataclass (its fields) and which form groups.
KINDS = ("grpo", "sft")


def kind_fields(kind: str) -> dict:
    return SFT_FIELDS if kind == "sft" else GRPO_FIELDS


def kind_groups(kind: str) -> list[str]:
    return SFT_GROUPS if kind == "sft" else GROUPS


# GRPOConfig / SFTConfig arguments the training program sets itself (workers.training.trainargs, train.grpo_config):
# an imported config's pass-through field of one of these names would be given twice
SET_BY_TRAINER_ARGS = (
    "output_dir",
    "use_cpu",
    "logging_steps",
    "save_strategy",
    "save_steps",
    "report_to",
    "disable_tqdm",
    "dataloader_num_workers",
    "vllm_server_host",
    "vllm_server_port",
)


def extra_problems(fields: dict, extra: dict) -> list[str]:
    """Pass-through fields that TRL's config would be given twice (a field the run sets, or one the training program
    sets), each naming the key: TRL would refuse them when the run starts, after it was queued."""
    return [
        f"{key}: given twice: it is one of the run's own fields; set it there, not as a pass-through field"
        if key in fields
        else f"{key}: the training program sets it for every run; it cannot pass through"
        for key in extra
        if key in fields or key in SET_BY_TRAINER_ARGS
    ]


def field_problems(fields: dict, values) -> list[str]:
    """Values below a field's minimum or outside its choices, each naming the field."""
    errors = []
    for name, f in fields.items():
        value = getattr(values, name)
        if value is None:
            continue
        if "min" in f.metadata and value < f.metadata["min"]:
            errors.append(f"{name}: must be at least {f.metadata['min']}.")
        if "choices" in f.metadata and value not in f.metadata["choices"]:
            errors.append(f"{name}: must be one of {', '.join(f.metadata['choices'])}.")
    return errors


# grpo-web's own setting (not a GRPOConfig field): the token-level view's sample (grpo_web_attach.tokens)
TOKEN_SAMPLE_GROUPS = _f(
    1,
    "Groups of each generation batch whose tokens are kept: per token the log-probability "
    "at generation and at the update, the reference's, the entropy, the importance ratio and "
    "the clipping, as TRL computed them. -1: every group; 0: none.",
    "tokens",
    min=-1,
)


@dataclass
class RewardSpec:
    """One reward function of a run. User code (``source``) runs in the sandbox; ``builtin`` names trusted library
    code run in-process (tests and benchmarks)."""

    name: str  # the name TRL logs it under: rewards/<name>/mean
    weight: float = 1.0
    source: str | None = None
    entrypoint: str | None = None
    builtin: str | None = None
    version_id: int | None = None  # the pinned RewardFunctionVersion, for the record

    def __post_init__(self):
        if (self.source is None) == (self.builtin is None):
            raise ValueError(f"reward {self.name!r}: give exactly one of source or builtin")


@dataclass
class ToolSpec:
    """One tool of a run (TRL's ``tools``): a function the model may call while it generates. Its code runs in the
    sandbox, the library's (``builtin``, rewards/library) and users' (``source``) alike; the model calls it by the
    function's name (``entrypoint``)."""

    name: str  # the tool's name in grpo-web (the run form and YAML)
    entrypoint: str  # the function: the name the model calls
    source: str | None = None
    builtin: str | None = None
    version_id: int | None = None  # the pinned RewardFunctionVersion (kind "tool"), for the record

    def __post_init__(self):
        if (self.source is None) == (self.builtin is None):
            raise ValueError(f"tool {self.name!r}: give exactly one of source or builtin")


@dataclass
class TrainConfig:
    model: str  # local path or hub id, loaded with from_pretrained
    dataset_path: str  # JSONL of rows with a ``prompt`` column and the columns rewards read
    output_dir: str
    event_log: str
    rewards: list[RewardSpec]
    grpo: GRPOFields = field(default_factory=GRPOFields)
    capture: bool = True  # write rollouts and metrics to the event log
    max_reward_faults: int = 3  # a sandboxed reward function that faults this often is disabled for the run
    allow_weak_sandbox: bool = False  # run user code even where Landlock or seccomp is missing (docs/sandbox.md)
    sandbox_slot_base: int = 100  # sandbox slots (and their uids) of this run's reward functions start here
    extra: dict = field(default_factory=dict)  # further GRPOConfig fields, passed through unchanged
    resume_from_checkpoint: str | None = None  # a checkpoint folder of this run: continue from its step
    vllm_server_port: int | None = None  # vllm_mode="server": the port of the TRL vLLM server the worker started
    evaluation: EvalFields = field(default_factory=EvalFields)
    eval_dataset_path: str | None = None  # JSONL of the eval split, rows as in dataset_path
    eval_source: str = "eval"  # the data source in the eval metrics' names (val-core/<source>/...)
    kind: str = "grpo"  # "grpo": GRPOTrainer with the grpo fields; "sft": SFTTrainer with the sft fields
    sft: SFTFields = field(default_factory=SFTFields)
    tokens_dir: str | None = None  # where the per-step token shards go (<run_dir>/tokens); None: no token capture
    token_sample_groups: int = TOKEN_SAMPLE_GROUPS
    trainer: str = "trl"  # "trl": workers.training.train; "verl": workers.training.verl_run (GRPO only, on GPUs)
    tools: list[ToolSpec] = field(default_factory=list)  # GRPO only: functions the model may call (TRL's ``tools``)
    max_tool_faults: int = 3  # a tool whose worker is lost (timeout, crash) this often is disabled for the run
    # GRPO only: TRL's environment_factory, an environment class (entrypoint: the class) run in the sandbox
    environment: ToolSpec | None = None

    @property
    def max_steps(self) -> int:
        return self.sft.max_steps if self.kind == "sft" else self.grpo.max_steps

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        data = dict(data)
        data["rewards"] = [RewardSpec(**r) for r in data["rewards"]]
        data["grpo"] = GRPOFields(**data.get("grpo", {}))
        data["evaluation"] = EvalFields(**data.get("evaluation", {}))
        data["sft"] = SFTFields(**data.get("sft", {}))
        data["tools"] = [ToolSpec(**t) for t in data.get("tools", [])]
        data["environment"] = ToolSpec(**data["environment"]) if data.get("environment") else None
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> "TrainConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def validate(self) -> list[str]:
        """Problems that would make TRL refuse the run, each naming the field."""
        if self.kind not in KINDS:
            return [f"kind: must be one of {', '.join(KINDS)}."]
        if self.trainer not in ("trl", "verl"):
            return ["trainer: must be one of trl, verl."]
        if self.trainer == "verl" and self.kind != "grpo":
            return ["trainer: verl trains GRPO runs only; an SFT run trains with trl."]
        errors = self._validate_sft() if self.kind == "sft" else self._validate_grpo()
        if isinstance(self.max_steps, int) and self.max_steps < 1:
            # -1 (TRL's default) is worked out as the steps num_train_epochs takes before a run is made
            errors.append("max_steps: -1 trains num_train_epochs; give num_train_epochs as a number above 0.")
        errors += extra_problems(SFT_FIELDS if self.kind == "sft" else GRPO_FIELDS, self.extra)
        from grpo_web_protocol.verl_carry import carried_problems

        errors += carried_problems(self.trainer, self.extra)
        errors += field_problems(EVAL_FIELDS, self.evaluation)
        if self.rewards and self.evaluation.eval_solved_by:
            names = [r.name for r in self.rewards]
            if self.evaluation.eval_solved_by not in names + ["reward"]:
                errors.append(
                    f"eval_solved_by: '{self.evaluation.eval_solved_by}' is not one of the run's rewards "
                    f"({', '.join(names)}) nor 'reward' (the weighted total)."
                )
        return errors

    def _validate_sft(self) -> list[str]:
        errors = field_problems(SFT_FIELDS, self.sft)
        if self.tools or self.environment:
            errors.append(
                f"{'tools' if self.tools else 'environment'}: an SFT run trains on fixed text; tools are "
                "called by a GRPO run's model as it generates."
            )
        if self.evaluation.eval_steps and not self.rewards:
            # an SFT run's reward functions only score its evaluations
            errors.append("rewards: pick the reward functions that score the evaluations, or set eval_steps to 0.")
        return errors

    def _validate_grpo(self) -> list[str]:
        g, errors = self.grpo, []
        if g.num_generations < 2:
            errors.append("num_generations: must be at least 2, or every advantage is zero.")
        else:
            # TRL's generation batch: generation_batch_size where the file sets it, else per_device_train_batch_size
            # x steps_per_generation (x processes; GRPOConfig.__post_init__)
            given = self.extra.get("generation_batch_size")
            steps = g.steps_per_generation or g.gradient_accumulation_steps
            if isinstance(given, int) and not isinstance(given, bool) and g.steps_per_generation is None:
                if given % g.num_generations:
                    errors.append(
                        f"generation_batch_size: {given} is not a multiple of num_generations ({g.num_generations})."
                    )
            elif (batch := g.per_device_train_batch_size * steps) % g.num_generations:
                errors.append(
                    f"per_device_train_batch_size: the generation batch ({g.per_device_train_batch_size} x {steps} "
                    f"steps per generation = {batch}) is not a multiple of num_generations ({g.num_generations})."
                )
        errors += field_problems(GRPO_FIELDS, g)
        errors += field_problems({"token_sample_groups": TOKEN_FIELDS["token_sample_groups"]}, self)
        if not self.rewards:
            errors.append("rewards: pick at least one reward function.")
        names = [t.entrypoint for t in self.tools]
        for name in sorted({n for n in names if names.count(n) > 1}):
            errors.append(f"tools: two tools are functions named {name!r}; the model could not tell them apart.")
        return errors


TOKEN_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig) if f.name == "token_sample_groups"}
