"""The training config: TRL GRPOConfig field names, typed, with help text.

Stored with the run (as JSON) and written next to the event log and every checkpoint. No Django here: the web form
builds its fields from :data:`GRPO_FIELDS`, and the training program turns the config into a ``GRPOConfig``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path


def _f(default, help_text: str, **extra):
    return field(default=default, metadata={"help": help_text, **extra})


@dataclass
class GRPOFields:
    """The GRPOConfig fields a run sets, under TRL's own names. Defaults suit the tiny demo model on a CPU."""

    num_generations: int = _f(8, "Completions sampled per prompt (G); the group is its own baseline.", min=2)
    max_completion_length: int = _f(16, "Maximum tokens generated per completion.", min=1)
    learning_rate: float = _f(1e-2, "AdamW learning rate.", min=0.0)
    beta: float = _f(0.0, "KL coefficient against the reference model; 0 skips the reference model.", min=0.0)
    epsilon: float = _f(0.2, "Clipping range of the policy ratio.", min=0.0)
    temperature: float = _f(1.0, "Sampling temperature for generation.", min=0.0)
    max_steps: int = _f(30, "Optimizer steps to train for.", min=1)
    per_device_train_batch_size: int = _f(16, "Completions per device per step; a multiple of num_generations.", min=1)
    seed: int = _f(42, "Random seed: the same seed gives the same run.")
    loss_type: str = _f("dapo", "Loss normalisation.", choices=("grpo", "dr_grpo", "dapo", "bnpo"))
    scale_rewards: str = _f("group", "Divide advantages by the std of the group, of the batch, or not at all.",
                            choices=("group", "batch", "none"))
    log_completions: bool = _f(False, "Also write TRL's own completions table (parquet) every logged step.")


GRPO_FIELDS = {f.name: f for f in dataclasses.fields(GRPOFields)}


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

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        data = dict(data)
        data["rewards"] = [RewardSpec(**r) for r in data["rewards"]]
        data["grpo"] = GRPOFields(**data.get("grpo", {}))
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> "TrainConfig":
        return cls.from_dict(json.loads(Path(path).read_text()))

    def validate(self) -> list[str]:
        """Problems that would make TRL refuse the run, each naming the field."""
        g, errors = self.grpo, []
        if g.num_generations < 2:
            errors.append("num_generations: must be at least 2, or every advantage is zero.")
        elif g.per_device_train_batch_size % g.num_generations:
            errors.append(
                f"per_device_train_batch_size: {g.per_device_train_batch_size} is not a multiple of "
                f"num_generations ({g.num_generations})."
            )
        for name, f in GRPO_FIELDS.items():
            value = getattr(g, name)
            if "min" in f.metadata and value < f.metadata["min"]:
                errors.append(f"{name}: must be at least {f.metadata['min']}.")
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                errors.append(f"{name}: must be one of {', '.join(f.metadata['choices'])}.")
        if not self.rewards:
            errors.append("rewards: pick at least one reward function.")
        return errors
