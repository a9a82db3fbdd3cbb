"""verl and Oumi training configs as the run YAML grpo-web reads (runs.lifecycle.trl_yaml): TRL's flat field names
plus model, dataset and rewards. Each key that does not carry over gets a note; the result goes through the same
import as a TRL config (dataset by name, rewards by name, the run form pre-filled). No database here.

- verl: a ppo_trainer-style config (``algorithm.adv_estimator: grpo``, ``actor_rollout_ref``, ``data``, ``trainer``),
  translated by grpo_web_protocol.verl_keys; the run trains with verl. grpo-web's own keys (dataset_name, reward_funcs,
  reward_weights) may sit at the top level; otherwise the dataset is named by the folder of ``data.train_files`` and
  the reward by ``custom_reward_function.name``.
- Oumi: a TrainingConfig with ``training.trainer_type`` (TRL_GRPO, VERL_GRPO or TRL_SFT), read by
  runs.lifecycle.oumi_yaml as Oumi's own mapping passes each key to TRL or verl.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from grpo_web_protocol.verl_keys import flatten, from_verl, verl_gpus

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
    fields, extra, notes, errors = from_verl(body, own_defaults=True)
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
                f"custom_reward_function: read as your reward function {out['reward_funcs'][0]!r}; grpo-web runs "
                f"it in its sandbox with TRL's contract (completions, **columns), bridged to verl's compute_score"
            )
    out.update(own)
    return out, notes, errors
