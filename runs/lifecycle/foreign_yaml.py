"""verl and Oumi training configs as the run YAML grpo-web reads (runs.lifecycle.trl_yaml): TRL's flat field names
plus model, dataset and rewards. Each key that does not carry over gets a note; the result goes through the same
import as a TRL config (dataset by name, rewards by name, the run form pre-filled). No database here.

- verl: a ppo_trainer-style config (``algorithm.adv_estimator: grpo``, ``actor_rollout_ref``, ``data``, ``trainer``),
  translated by workers.training.protocol.verl_keys; the run trains with verl. grpo-web's own keys (dataset_name, reward_funcs,
  reward_weights) may sit at the top level; otherwise the dataset is named by the folder of ``data.train_files`` and
  the reward by ``custom_reward_function.name``.
- Oumi: a TrainingConfig with ``training.trainer_type`` TRL_GRPO (trains with TRL) or VERL_GRPO (with verl);
  ``training.grpo`` holds GRPOConfig's generation fields, ``training.verl_config_overrides`` verl keys.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from workers.training.protocol.config import GRPO_FIELDS
from workers.training.protocol.verl_keys import flatten, from_verl, verl_gpus

OWN_KEYS = (
    "name",
    "dataset_name",
    "dataset_version",
    "reward_funcs",
    "reward_weights",
    "reward_versions",
    "requested_gpus",
    "system_prompt",
    "dataset_prompt_column",
)
# Oumi's training.* names that differ from TRL's
OUMI_RENAMED = {"enable_gradient_checkpointing": "gradient_checkpointing", "reward_functions": "reward_funcs"}
OUMI_TRAINERS = {"TRL_GRPO": "grpo", "VERL_GRPO": "verl"}
# Oumi keys grpo-web sets for every run (workers/training/trainargs.py): the imported value would be overridden
OUMI_SET_BY_GRPO_WEB = {
    "trainer_type",
    "output_dir",
    "logging_steps",
    "run_name",
    "logging_strategy",
    "dataloader_num_workers",
}
# Oumi keys about its own machinery (trackers, compile, data loading, export): not applied, the trainer's defaults hold
OUMI_NOT_APPLIED = {
    "enable_wandb",
    "enable_tensorboard",
    "enable_mlflow",
    "log_model_summary",
    "include_performance_metrics",
    "dataloader_prefetch_factor",
    "compile",
    "ddp_find_unused_parameters",
    "gradient_checkpointing_kwargs",
    "save_final_model",
    "optimizer",
    "try_resume_from_last_checkpoint",
}


def kind_of(data: dict) -> str | None:
    """ "verl", "oumi", or None (a TRL config)."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("training"), dict) and "trainer_type" in data["training"]:
        return "oumi"
    if isinstance(data.get("actor_rollout_ref"), dict) or isinstance(data.get("algorithm"), dict):
        return "verl"
    return None


def from_verl_yaml(data: dict) -> tuple[dict, list[str], list[str]]:
    """A verl config -> (run YAML mapping, notes, errors)."""
    own = {k: data[k] for k in OWN_KEYS if k in data}
    body = {k: v for k, v in data.items() if k not in OWN_KEYS}
    fields, extra, notes, errors = from_verl(body)
    flat = flatten(body)
    out: dict = {"trainer": "verl", **fields, **extra}
    out["name"] = own.get("name") or flat.get("trainer.experiment_name") or "imported verl run"
    if flat.get("actor_rollout_ref.model.path"):
        out["model_name_or_path"] = flat["actor_rollout_ref.model.path"]
    out["requested_gpus"] = own.get("requested_gpus") or verl_gpus(flat, errors)
    if "dataset_name" not in own:
        train = flat.get("data.train_files")
        train = train[0] if isinstance(train, list) and train else train
        if isinstance(train, str) and train:
            out["dataset_name"] = PurePosixPath(train).parent.name or PurePosixPath(train).stem
            notes.append(
                f"data.train_files: {train!r} read as your dataset {out['dataset_name']!r} (its version's "
                f"rows are written in verl's parquet layout for the run); set dataset_name to pick another"
            )
    if "reward_funcs" not in own:
        name = flat.get("reward.custom_reward_function.name") or flat.get("custom_reward_function.name")
        if flat.get("reward.custom_reward_function.path") or flat.get("custom_reward_function.path"):
            out["reward_funcs"] = [name or "compute_score"]
            notes.append(
                f"custom_reward_function: read as your reward function {name!r}; grpo-web runs it in its "
                f"sandbox with TRL's contract (completions, **columns), bridged to verl's compute_score"
            )
    out.update(own)
    return out, notes, errors


def from_oumi_yaml(data: dict) -> tuple[dict, list[str], list[str]]:
    """An Oumi TrainingConfig -> (run YAML mapping, notes, errors)."""
    notes: list[str] = []
    errors: list[str] = []
    training = dict(data.get("training") or {})
    trainer_type = str(training.pop("trainer_type"))
    out: dict = {k: data[k] for k in OWN_KEYS if k in data}
    if trainer_type not in OUMI_TRAINERS:
        errors.append(f"training.trainer_type: {trainer_type!r}; grpo-web imports TRL_GRPO or VERL_GRPO")
        return out, notes, errors
    out["trainer"] = OUMI_TRAINERS[trainer_type]
    shapes = {
        "model": data.get("model") or {},
        "data": data.get("data") or {},
        "data.train": (data.get("data") or {}).get("train") or {} if isinstance(data.get("data"), dict) else {},
        "training.grpo": training.get("grpo") or {},
        "training.verl_config_overrides": training.get("verl_config_overrides") or {},
    }
    wrong = [key for key, value in shapes.items() if not isinstance(value, dict)]
    if wrong:
        errors += [f"{key}: a mapping of Oumi's {key} settings" for key in wrong]
        return out, notes, errors
    model = shapes["model"]
    if model.get("model_name"):
        out.setdefault("model_name_or_path", model["model_name"])
    for key in model:
        if key != "model_name":
            notes.append(f"model.{key}: not applied (the model loads with its own settings)")
    datasets = shapes["data.train"].get("datasets") or []
    if not isinstance(datasets, list) or not all(isinstance(d, dict) for d in datasets):
        errors.append("data.train.datasets: a list of datasets, each with its dataset_name")
        return out, notes, errors
    if datasets and "dataset_name" not in out:
        out["dataset_name"] = datasets[0].get("dataset_name")
        if len(datasets) > 1:
            notes.append("data.train.datasets: only the first is used; mix datasets into one version on its page")
    if shapes["data"].get("validation"):
        notes.append("data.validation: the dataset version's own eval split is used")
    out.setdefault("name", training.pop("run_name", None) or "imported Oumi run")
    grpo = training.pop("grpo", None) or {}
    overrides = training.pop("verl_config_overrides", None) or {}
    trainer_kwargs = training.pop("trainer_kwargs", None) or {}
    if not isinstance(trainer_kwargs, dict):
        errors.append("training.trainer_kwargs: a mapping of the trainer's arguments")
        trainer_kwargs = {}
    for key, value in trainer_kwargs.items():
        # Oumi passes them to the TRL trainer's config: GRPOConfig's names, read as the rest of the file
        out[key] = value
        notes.append(f"training.trainer_kwargs.{key}: read as {key}: {value!r}")
    if out["trainer"] == "verl" and isinstance(training.get("save_steps"), int) and training["save_steps"] < 0:
        notes.append("training.save_steps: -1 (Oumi's verl trainer: trainer.save_freq -1) saves no checkpoint")
        training["save_steps"] = 0
    for key, value in training.items():
        name = OUMI_RENAMED.get(key, key)
        if key in OUMI_SET_BY_GRPO_WEB:
            notes.append(f"training.{key}: set by grpo-web for every run; the imported value is ignored")
        elif key in OUMI_NOT_APPLIED:
            notes.append(
                f"training.{key}: Oumi's own setting; not applied (the run trains with TRL's or verl's default for it)"
            )
        elif name == "reward_funcs":
            out.setdefault("reward_funcs", value)
        else:
            out[name] = value  # TRL TrainingArguments names: the TRL import checks them
    for key, value in grpo.items():
        if key in GRPO_FIELDS or key in ("max_prompt_length", "vllm_device", "use_vllm", "vllm_mode"):
            out[key] = value
        else:
            notes.append(f"training.grpo.{key}: not applied (no grpo-web field)")
    if overrides:
        if out["trainer"] != "verl":
            notes.append("training.verl_config_overrides: a TRL_GRPO run does not use them")
        else:
            # Oumi sets adv_estimator: grpo, then merges the overrides into verl's config (OmegaConf.merge)
            fields, extra, more, errs = from_verl(_merged({"algorithm": {"adv_estimator": "grpo"}}, overrides))
            out.update(fields)
            out.update(extra)
            notes += [f"training.verl_config_overrides: {n}" for n in more]
            errors += errs
    if out["trainer"] == "verl" and "requested_gpus" not in out:
        out["requested_gpus"] = verl_gpus(flatten(overrides), errors)
    return out, notes, errors


def _merged(base: dict, more) -> dict:
    """``more`` merged into ``base`` key by key, nested mappings too (as OmegaConf.merge does)."""
    if not isinstance(more, dict):
        return base
    out = dict(base)
    for key, value in more.items():
        out[key] = _merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out
