"""Runs as TRL config YAML: what `trl grpo --config` reads (TRL's field names, flat), plus model, dataset and rewards.
``trainer: sft`` makes it an SFT run: SFTConfig's names, as `trl sft --config` reads them (rewards optional: they
only score its evaluations).

A TRL user's config comes in unchanged: GRPOConfig fields the run form knows fill the form; other GRPOConfig fields
are passed through to GRPOConfig; fields grpo-web sets itself (output_dir, logging, reporting) are ignored with a note;
anything else is an error naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml
from django.db.models import Case, When

from rewards.models import RewardFunction
from runs.access import visible_versions
from runs.models import DatasetVersion, Run
from runs.protocol.config import EVAL_FIELDS, GRPO_FIELDS, KINDS, GRPOFields, kind_fields
from runs.protocol.trl_fields import GRPO_CONFIG_FIELDS, SFT_CONFIG_FIELDS

# Set by grpo-web for every run (workers/train.py), so an imported value would be overridden anyway.
MANAGED = {"output_dir", "logging_steps", "logging_strategy", "report_to", "save_strategy", "disable_tqdm",
           "use_cpu", "dataloader_num_workers", "run_name", "logging_dir", "push_to_hub", "hub_model_id",
           "reward_weights", "overwrite_output_dir"}
# TRL script arguments (ScriptArguments / ModelConfig) we read or may safely ignore.
SCRIPT_KEYS = {"model_name_or_path", "model", "dataset_name", "dataset_version", "reward_funcs", "reward_versions",
               "requested_gpus", "name", "trainer"}
IGNORED_SCRIPT_KEYS = {"dataset_config", "dataset_train_split", "dataset_test_split", "torch_dtype", "dtype",
                       "trust_remote_code", "attn_implementation", "use_peft", "lora_r", "lora_alpha",
                       "lora_dropout", "lora_target_modules", "model_revision"}


@dataclass
class ImportedRun:
    name: str = ""
    model: str = "tiny"
    dataset_version: DatasetVersion | None = None
    rewards: list[dict] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    evaluation: dict = field(default_factory=dict)  # workers.config.EvalFields
    requested_gpus: int = 0
    kind: str = "grpo"  # the ``trainer`` key: grpo or sft
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _coerce(name: str, value, errors: list[str], fields: dict = GRPO_FIELDS):
    f = fields.get(name) or EVAL_FIELDS[name]
    default = f.default
    if value is None:
        return None
    try:
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError
            return value
        if name == "bf16":
            return {True: "yes", False: "no"}.get(value, str(value))
        if isinstance(default, int) or f.type in ("int", "int | None"):
            return int(value)
        if isinstance(default, float) or f.type in ("float", "float | None"):
            return float(value)
        return str(value.value if hasattr(value, "value") else value)
    except (TypeError, ValueError):
        errors.append(f"{name}: {value!r} is not a valid value")
        return default


def parse_run_yaml(text: str, *, owner) -> ImportedRun:
    out = ImportedRun()
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        out.errors.append(f"{where}not valid YAML ({getattr(exc, 'problem', exc)})")
        return out
    except RecursionError:
        out.errors.append("the YAML is nested too deeply to read")
        return out
    if not isinstance(data, dict):
        out.errors.append("the YAML must be a mapping of TRL field names to values")
        return out

    out.kind = str(data.get("trainer") or "grpo")
    if out.kind not in KINDS:
        out.errors.append(f"trainer: must be one of {', '.join(KINDS)}, not {out.kind!r}")
        out.kind = "grpo"
    fields = kind_fields(out.kind)
    trl_fields, trl_config = (SFT_CONFIG_FIELDS, "SFTConfig") if out.kind == "sft" else (GRPO_CONFIG_FIELDS,
                                                                                         "GRPOConfig")
    out.name = str(data.get("name") or "imported run")
    out.model = str(data.get("model_name_or_path") or data.get("model") or "tiny")
    out.requested_gpus = int(data.get("requested_gpus") or 0)
    dataset_name = data.get("dataset_name")
    versions = visible_versions(owner).filter(dataset__name=dataset_name)
    if data.get("dataset_version") is not None:
        versions = versions.filter(number=data["dataset_version"])
    out.dataset_version = versions.order_by("-number").first()
    if out.dataset_version is None:
        out.errors.append(f"dataset_name: you have no dataset named {dataset_name!r}"
                          + (f" with version {data['dataset_version']}" if data.get("dataset_version") else ""))

    names = data.get("reward_funcs") or []
    names = [names] if isinstance(names, str) else names
    weights = data.get("reward_weights") or [1.0] * len(names)
    pinned = data.get("reward_versions") or [None] * len(names)
    if not names and out.kind == "grpo":
        out.errors.append("reward_funcs: name at least one of your reward functions")
    if len(weights) != len(names) or len(pinned) != len(names):
        out.errors.append("reward_weights / reward_versions: one value per entry of reward_funcs")
    else:
        for name, weight, number in zip(names, weights, pinned):
            # the user's own function first, then one a team shares with them
            rf = (RewardFunction.objects.visible_to(owner).filter(name=name)
                  .order_by(Case(When(owner=owner, then=0), default=1), "pk").first())
            version = rf and (rf.versions.filter(number=number).first() if number else rf.latest_version)
            if version is None:
                out.errors.append(f"reward_funcs: you have no reward function {name!r}"
                                  + (f" with version {number}" if number else ""))
                continue
            out.rewards.append({"name": rf.name, "weight": float(weight), "version_id": version.pk,
                                "version": version.number})

    out.config = {name: f.default for name, f in fields.items()}
    for key, value in data.items():
        if key in SCRIPT_KEYS or key == "reward_weights":
            continue
        if key in fields:
            out.config[key] = _coerce(key, value, out.errors, fields)
        elif key in EVAL_FIELDS:  # eval_steps is TRL's name too: every N steps, on the eval split
            out.evaluation[key] = _coerce(key, value, out.errors)
        elif key in MANAGED or key in IGNORED_SCRIPT_KEYS:
            out.notes.append(f"{key}: set by grpo-web for every run; the imported value is ignored")
        elif key in trl_fields:
            out.extra[key] = value
            out.notes.append(f"{key}: passed to {trl_config} as it is")
        else:
            out.errors.append(f"{key}: not a {trl_config} field nor a grpo-web key")
    return out


def run_yaml(run: Run) -> str:
    """The run as a TRL GRPOConfig (an SFT run: SFTConfig) YAML plus model, dataset and pinned rewards;
    parse_run_yaml reads it back."""
    data = {"trainer": run.kind} if run.is_sft else {}
    data |= {
        "name": run.name,
        "model_name_or_path": run.model,
        "dataset_name": run.dataset_version.dataset.name,
        "dataset_version": run.dataset_version.number,
        "reward_funcs": [r["name"] for r in run.rewards],
        "reward_weights": [r["weight"] for r in run.rewards],
        "reward_versions": [r.get("version") for r in run.rewards],
        "requested_gpus": run.requested_gpus,
    }
    fields = kind_fields(run.kind)
    config = {k: v for k, v in run.config.items() if k in fields and v is not None}
    config.update({k: v for k, v in (run.evaluation or {}).items() if k in EVAL_FIELDS})
    trl_config = "SFTConfig" if run.is_sft else "GRPOConfig"
    header = f"# grpo-web run {run.pk}: model, dataset and rewards, then TRL {trl_config} fields\n"
    return header + yaml.safe_dump(data, sort_keys=False) + yaml.safe_dump({**config, **run.config_extra},
                                                                          sort_keys=False)


def grpo_defaults() -> dict:
    return {name: getattr(GRPOFields(), name) for name in GRPO_FIELDS}
