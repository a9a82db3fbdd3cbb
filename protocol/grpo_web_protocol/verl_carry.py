"""The keys of a verl file that reach verl as written (issue 43): each key the import does not translate into a run
field is carried in the run's ``config_extra`` under its dotted verl name, and ``verl_keys.overrides`` gives it to
verl after grpo-web's own values, so the file's value wins. A key the file leaves out takes verl's own default (its
installed ppo_trainer.yaml, ``verl_keys.verl_defaults``), never TRL's nor grpo-web's. No Django here.

Three kinds of key are not carried: those translated into a run field (they come back from the field, which the run
form can edit), those grpo-web sets for every verl run (paths, loggers, the reward bridge, the layout: the file's
value is replaced, with a note naming both), and those this verl's config does not have (noted).
"""

from __future__ import annotations

import re

import yaml

# verl keys grpo-web sets for every verl run it starts, each with why: a file's other value is replaced (noted)
OWNED = {
    **dict.fromkeys(
        ("data.train_files", "data.val_files", "data.prompt_key", "data.reward_fn_key"),
        "the run's dataset version is written in verl's parquet layout, its prompt in the prompt column",
    ),
    "actor_rollout_ref.model.path": "the run's model",
    **dict.fromkeys(
        (
            "reward.custom_reward_function.path",
            "reward.custom_reward_function.name",
            "custom_reward_function.path",
            "custom_reward_function.name",
        ),
        "grpo-web's bridge scores with the run's reward functions in its sandbox",
    ),
    **dict.fromkeys(
        ("reward.num_workers", "reward_model.num_workers"),
        "one reward worker, whose sandbox slots the worker reserves for the run",
    ),
    **dict.fromkeys(
        (
            "trainer.logger",
            "trainer.project_name",
            "trainer.experiment_name",
            "trainer.default_local_dir",
            "trainer.rollout_data_dir",
            "trainer.use_v1",
        ),
        "where verl writes what the run page reads (metrics, rollouts, checkpoints)",
    ),
    **dict.fromkeys(
        ("trainer.resume_mode", "trainer.resume_from_path"), "a retried run resumes from its own last checkpoint"
    ),
}
# Keys grpo-web sets to its own values for the runs it builds (the run form): a verl file's value, or verl's own
# default where the file leaves the key out, is carried instead
HOUSE = (
    "actor_rollout_ref.rollout.name",
    "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.actor.entropy_coeff",
    "actor_rollout_ref.actor.kl_loss_type",
    "algorithm.use_kl_in_reward",
    "data.max_prompt_length",
    "data.truncation",
    "data.filter_overlong_prompts",
    "data.dataloader_num_workers",
    "trainer.val_before_train",
)


# verl's older reward sections, which verl's migrate_legacy_reward_impl moves under reward.
LEGACY = ("reward_model.", "custom_reward_function.", "sandbox_fusion.")


# What grpo-web gives verl for a HOUSE key whose verl default is null or required (verl_keys.overrides)
HOUSE_OWN = {
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": "the run's per_device_train_batch_size",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": "the run's per_device_train_batch_size",
    "data.max_prompt_length": "the longest prompt of the dataset, in tokens",
}


def is_verl_key(key: str) -> bool:
    """A config_extra key carried to verl (a dotted verl name), not a GRPOConfig field passed to TRL."""
    return "." in key


def carried(
    flat: dict, translated: set[str], defaults: dict, version: str, *, left_out: bool = True, derived: dict = {}
) -> tuple[dict, list[str]]:
    """(the file's keys carried to verl as written, and, with ``left_out``, verl's defaults for the HOUSE keys it
    leaves out; notes). ``flat``: the file's keys, dotted; ``translated``: those read into run fields."""
    keep: dict = {}
    notes: list[str] = []
    unknown: list[str] = []
    quiet = 0
    for key, value in flat.items():
        if key in translated or key.startswith(("hydra", "_", "defaults")):
            continue
        if key.endswith("._target_") and key in defaults:  # the dataclass verl builds the section as
            if defaults[key] != value:
                notes.append(f"{key}: {shown(value)} not applied: verl {version} builds it as {defaults[key]}")
            continue
        if key in OWNED:
            notes.append(f"{key}: {shown(value)} replaced: grpo-web sets it for every verl run ({OWNED[key]})")
            continue
        follows = next((p for p in _parents(key) if p in derived), None)
        if defaults and key not in defaults:
            unknown.append(key)
        elif defaults.get(key) == value and key not in HOUSE:
            quiet += 1  # verl's own value, which the run has from verl anyway
        elif follows:
            notes.append(
                f"{key}: {shown(value)} not applied: verl {version}'s {follows} follows {derived[follows]} "
                f"(its default here: {shown(defaults.get(key))}); set that instead"
            )
        elif value == "???":
            notes.append(
                f"{key}: '???' is verl's mark for a value not given; not applied (verl {version}'s default: "
                f"{shown(defaults.get(key))})"
            )
        else:
            keep[key] = value
    for key in HOUSE if left_out else ():
        if key in flat or key not in defaults:
            continue
        default = defaults[key]
        if default is None or default == "???":
            # verl requires it set, or leaves it unset: grpo-web's own value stands, with a note naming it
            said = "required (verl refuses a config without it)" if default == "???" else "null"
            notes.append(f"{key}: left out, and verl's default is {said}; grpo-web gives verl {HOUSE_OWN[key]}")
            continue
        keep[key] = default
    if unknown:
        notes.append(
            f"not keys of verl {version}'s config here (verl would refuse them); not applied: " + ", ".join(unknown)
        )
    legacy = [k for k in keep if k.startswith(LEGACY)]
    if legacy:
        notes.append(
            "verl's older reward keys, moved by verl's own migration (migrate_legacy_reward_impl) to where verl "
            f"{version} reads them, under reward.: " + ", ".join(legacy)
        )
    if keep:
        notes.append(
            "carried to verl as written (they apply when verl trains this run; TRL has no such settings): "
            + ", ".join(f"{k}={shown(v)}" for k, v in keep.items() if k in flat)
        )
    omitted = [k for k in keep if k not in flat]
    if omitted:
        notes.append(
            f"left out, so verl {version}'s own defaults (not grpo-web's for its own runs): "
            + ", ".join(f"{k}={shown(keep[k])}" for k in omitted)
        )
    if quiet:
        notes.append(
            f"{quiet} more keys hold verl's own defaults (verl {version}): the run has them from verl; not listed"
        )
    return keep, [n for n in notes if not n.endswith(": ")]


def _parents(key: str) -> list[str]:
    parts = key.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def shown(value) -> str:
    text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
    return text if len(text) <= 80 else text[:77] + "..."


def hydra_value(value) -> str:
    """``value`` as a Hydra override's value that reads back as the same YAML value (null, lists, quoted text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        plain = re.fullmatch(r"[A-Za-z_/][\w./-]*", value) and yaml.safe_load(value) == value
        return value if plain else "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


def trl_problems(extra: dict, defaults: dict) -> list[str]:
    """verl settings a run carries that TRL, training it, has no equivalent of, each naming key and value; verl's
    own defaults the import wrote down for keys the file left out are not refused (TRL has its own)."""
    return [
        f"{key}: {shown(value)} is a verl setting from the imported verl file, which TRL has no equivalent of; "
        f"train with verl (trainer: verl), or remove it"
        for key, value in extra.items()
        if is_verl_key(key) and defaults.get(key, object()) != value
    ]


def carried_problems(trainer: str, extra: dict) -> list[str]:
    """Carried verl keys a run cannot train with, each naming the key: under TRL, those that are not verl's own
    default (TRL has no equivalent); under verl, those grpo-web sets for every verl run."""
    from grpo_web_protocol.verl_defaults import verl_defaults

    if trainer == "verl":
        return [
            f"{key}: grpo-web sets it for every verl run ({OWNED[key]}); it cannot be carried"
            for key in extra
            if key in OWNED
        ]
    return trl_problems(extra, verl_defaults())


def run_yaml_key_problem(key: str, trainer: str) -> str | None:
    """Why a dotted (verl) key in a run YAML cannot be carried to verl, or None where it can."""
    from grpo_web_protocol.verl_defaults import verl_defaults, verl_version

    if trainer != "verl":
        return f"{key}: a verl key; a TRL run has no such setting (add `trainer: verl` to train with verl, where it applies)"
    if key in OWNED:
        return f"{key}: grpo-web sets it for every verl run ({OWNED[key]})"
    defaults = verl_defaults()
    if defaults and key not in defaults:
        return f"{key}: not a key of verl {verl_version() or ''}'s config (verl would refuse it)"
    return None
