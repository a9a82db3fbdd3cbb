"""A run's config under verl's Hydra keys (its ``ppo_trainer.yaml`` with ``algorithm.adv_estimator=grpo``), and back.

``overrides`` gives the ``key=value`` list ``python -m verl.trainer.main_ppo`` takes; tests compose them onto verl's
own default config, so every key exists there. ``from_verl`` reads a verl config (a YAML a user brings) into the
run's GRPOConfig-named fields, with a note for each key it cannot carry over. No Django here.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
from pathlib import Path

from workers.training.protocol.config import GRPOFields, TrainConfig

TRAINERS = ("trl", "verl")

# TRL's loss_type -> verl's actor.loss_agg_mode (how token losses are averaged): the same normalisations
LOSS_AGG = {
    "grpo": "seq-mean-token-mean",
    "dapo": "token-mean",
    "bnpo": "token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
}
# TRL's loss_type values that are a policy loss of their own in verl (actor.policy_loss.loss_mode)
LOSS_MODE = {"cispo": "cispo", "sapo": "sapo"}
# verl's two learning-rate schedules (actor.optim.lr_scheduler_type)
VERL_SCHEDULERS = ("constant", "cosine")
VERL_ROLLOUT_DIR = "verl_rollouts"  # under the run's output_dir: verl's rollout_data_dir, {step}.jsonl


def prompts_per_step(g: GRPOFields, gpus: int) -> int:
    """Prompts behind one optimizer step: TRL counts completions per device (B x GA), G of them per prompt."""
    return max(1, g.per_device_train_batch_size * g.gradient_accumulation_steps * max(1, gpus) // g.num_generations)


def node_layout(gpus: int, node_gpus: list[int]) -> tuple[int, int]:
    """(GPUs per node, nodes) for a verl run on ``gpus`` GPUs of a Ray cluster whose live nodes have ``node_gpus``:
    verl asks every node of its pool for the same number of GPUs, so the most per node that enough nodes have and
    that divides ``gpus``. Raises ValueError, saying what the cluster has, when no layout fits."""
    for per_node in range(gpus, 0, -1):
        if gpus % per_node == 0 and sum(1 for n in node_gpus if n >= per_node) >= gpus // per_node:
            return per_node, gpus // per_node
    raise ValueError(
        f"the Ray cluster cannot place {gpus} GPU(s) for verl: its live nodes have "
        f"{', '.join(str(n) for n in node_gpus) or 'no'} GPU(s)"
    )


def overrides(
    config: TrainConfig,
    *,
    train_file: str,
    val_file: str,
    reward_path: str,
    config_path: str,
    gpus: int = 1,
    nnodes: int = 1,
    max_prompt_length: int = 512,
    flash_attn: bool = True,
) -> list[str]:
    """verl's command-line overrides for this run (GRPO, vLLM rollout on ``gpus`` GPUs on each of ``nnodes`` nodes).
    Without ``flash_attn`` (the package is missing) the actor uses PyTorch's SDPA attention on padded batches."""
    g = config.grpo
    per_step = prompts_per_step(g, max(1, gpus) * max(1, nnodes))
    # TRL generates B x steps_per_generation completions at a time and takes several optimizer steps on them
    per_generation = (
        per_step * (g.steps_per_generation or g.gradient_accumulation_steps) // g.gradient_accumulation_steps
    )
    actor = "actor_rollout_ref.actor"
    rollout = "actor_rollout_ref.rollout"
    values: dict[str, object] = {
        "algorithm.adv_estimator": "grpo",
        "algorithm.norm_adv_by_std_in_grpo": g.scale_rewards != "none",
        "algorithm.use_kl_in_reward": False,
        "data.train_files": train_file,
        "data.val_files": val_file,
        "data.prompt_key": "prompt",
        "data.train_batch_size": per_generation,
        "data.max_prompt_length": max_prompt_length,
        "data.max_response_length": g.max_completion_length,
        "data.filter_overlong_prompts": True,
        "data.truncation": "left",
        "data.seed": g.seed,
        "data.dataloader_num_workers": 0,
        "actor_rollout_ref.model.path": config.model,
        "actor_rollout_ref.model.enable_gradient_checkpointing": g.gradient_checkpointing,
        "actor_rollout_ref.model.lora_rank": g.lora_r if g.use_peft else 0,
        "actor_rollout_ref.model.lora_alpha": g.lora_alpha,
        "actor_rollout_ref.model.target_modules": g.lora_target_modules,
        f"{actor}.ppo_mini_batch_size": per_step,
        f"{actor}.ppo_micro_batch_size_per_gpu": g.per_device_train_batch_size,
        f"{actor}.ppo_epochs": g.num_iterations,
        f"{actor}.clip_ratio_low": g.epsilon,
        f"{actor}.clip_ratio_high": g.epsilon if g.epsilon_high is None else g.epsilon_high,
        f"{actor}.loss_agg_mode": LOSS_AGG.get(g.loss_type, "token-mean"),
        f"{actor}.policy_loss.loss_mode": (
            "gspo" if g.importance_sampling_level == "sequence" else LOSS_MODE.get(g.loss_type, "vanilla")
        ),
        f"{actor}.use_kl_loss": g.beta > 0,
        f"{actor}.kl_loss_coef": g.beta,
        f"{actor}.kl_loss_type": "low_var_kl",  # k3, the estimator TRL's beta uses
        f"{actor}.entropy_coeff": 0,
        f"{actor}.grad_clip": g.max_grad_norm,
        f"{actor}.data_loader_seed": g.seed,
        f"{actor}.optim.lr": g.learning_rate,
        f"{actor}.optim.weight_decay": g.weight_decay,
        f"{actor}.optim.lr_warmup_steps": int(config.extra.get("warmup_steps", 0) or 0)
        if float(config.extra.get("warmup_steps", 0) or 0) >= 1
        else -1,
        f"{actor}.optim.lr_warmup_steps_ratio": float(config.extra.get("warmup_steps", 0) or 0)
        if float(config.extra.get("warmup_steps", 0) or 0) < 1
        else 0.0,
        f"{actor}.optim.lr_scheduler_type": g.lr_scheduler_type
        if g.lr_scheduler_type in VERL_SCHEDULERS
        else "constant",
        f"{rollout}.name": "vllm",
        f"{rollout}.n": g.num_generations,
        f"{rollout}.temperature": g.temperature,
        f"{rollout}.top_p": g.top_p,
        f"{rollout}.top_k": g.top_k or -1,  # verl's "no top-k" is -1, TRL's is 0
        f"{rollout}.gpu_memory_utilization": g.vllm_gpu_memory_utilization,
        f"{rollout}.tensor_model_parallel_size": 1,
        f"{rollout}.log_prob_micro_batch_size_per_gpu": g.per_device_train_batch_size,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": g.per_device_train_batch_size,
        "reward.num_workers": 1,  # one reward worker: one sandbox per reward function, in slots of its own
        "reward.custom_reward_function.path": reward_path,
        "reward.custom_reward_function.name": "compute_score",
        "+reward.custom_reward_function.reward_kwargs.config_path": config_path,
        "trainer.total_epochs": 1000,  # total_training_steps decides
        "trainer.total_training_steps": g.max_steps,
        "trainer.project_name": "grpo-web",
        "trainer.experiment_name": "run",
        "trainer.logger": "[console,file]",
        "trainer.rollout_data_dir": f"{config.output_dir}/{VERL_ROLLOUT_DIR}",
        "trainer.default_local_dir": f"{config.output_dir}/checkpoints",
        "trainer.save_freq": g.save_steps or g.max_steps,  # verl also saves the last step: the final model
        "trainer.max_actor_ckpt_to_keep": g.save_total_limit,
        "trainer.resume_mode": "resume_path" if config.resume_from_checkpoint else "disable",
        "trainer.test_freq": config.evaluation.eval_steps or -1,
        "trainer.val_before_train": bool(config.evaluation.eval_steps),
        "trainer.n_gpus_per_node": max(1, gpus),
        "trainer.nnodes": max(1, nnodes),
        "trainer.use_v1": False,  # RayPPOTrainer (main_ppo_v0), whose rollout dump the capture extends
    }
    if config.resume_from_checkpoint:
        values["trainer.resume_from_path"] = config.resume_from_checkpoint
    if not flash_attn:
        values["actor_rollout_ref.model.use_remove_padding"] = False
        values["+actor_rollout_ref.model.override_config.attn_implementation"] = "sdpa"
    return [f"{key}={_hydra(value)}" for key, value in values.items()]


def _hydra(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and any(c in value for c in " ,=:'\"") and not value.startswith(("[", '"')):
        return json.dumps(value)  # Hydra's quoted string
    return str(value)


# verl key (dotted) -> (our field, converter): what a verl YAML carries into the run form
FROM_VERL = {
    "actor_rollout_ref.rollout.n": ("num_generations", int),
    "data.max_response_length": ("max_completion_length", int),
    "actor_rollout_ref.rollout.temperature": ("temperature", float),
    "actor_rollout_ref.rollout.top_p": ("top_p", float),
    "actor_rollout_ref.rollout.top_k": ("top_k", lambda v: max(0, int(v))),
    "actor_rollout_ref.rollout.gpu_memory_utilization": ("vllm_gpu_memory_utilization", float),
    "actor_rollout_ref.actor.kl_loss_coef": ("beta", float),
    "actor_rollout_ref.actor.clip_ratio_low": ("epsilon", float),
    "actor_rollout_ref.actor.clip_ratio": ("epsilon", float),
    "actor_rollout_ref.actor.clip_ratio_high": ("epsilon_high", float),
    "actor_rollout_ref.actor.ppo_epochs": ("num_iterations", int),
    "actor_rollout_ref.actor.grad_clip": ("max_grad_norm", float),
    "actor_rollout_ref.actor.optim.lr": ("learning_rate", float),
    "actor_rollout_ref.actor.optim.weight_decay": ("weight_decay", float),
    "actor_rollout_ref.actor.optim.lr_scheduler_type": ("lr_scheduler_type", str),
    "actor_rollout_ref.model.enable_gradient_checkpointing": ("gradient_checkpointing", bool),
    "actor_rollout_ref.model.lora_alpha": ("lora_alpha", int),
    "actor_rollout_ref.model.target_modules": ("lora_target_modules", str),
    "trainer.total_training_steps": ("max_steps", int),
    "trainer.save_freq": ("save_steps", lambda v: max(0, int(v))),
    "trainer.max_actor_ckpt_to_keep": ("save_total_limit", int),
    "data.seed": ("seed", int),
}
# verl keys the run sets itself (paths, loggers, layout), or that say nothing a run can change
MANAGED_VERL = {
    "data.train_files",
    "data.val_files",
    "data.prompt_key",
    "data.reward_fn_key",
    "data.filter_overlong_prompts",
    "data.truncation",
    "data.dataloader_num_workers",
    "data.max_prompt_length",
    "actor_rollout_ref.model.path",
    "actor_rollout_ref.rollout.name",
    "actor_rollout_ref.rollout.tensor_model_parallel_size",
    "actor_rollout_ref.rollout.mode",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.actor.use_kl_loss",
    "actor_rollout_ref.actor.kl_loss_type",
    "actor_rollout_ref.actor.loss_agg_mode",
    "actor_rollout_ref.actor.entropy_coeff",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.model.lora_rank",
    "actor_rollout_ref.model.use_remove_padding",
    "actor_rollout_ref.actor.fsdp_config.param_offload",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
    "actor_rollout_ref.ref.fsdp_config.param_offload",
    "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
    "actor_rollout_ref.actor.optim.lr_warmup_steps",
    "actor_rollout_ref.actor.policy_loss.loss_mode",
    "algorithm.adv_estimator",
    "algorithm.norm_adv_by_std_in_grpo",
    "algorithm.use_kl_in_reward",
    "data.train_batch_size",
    "reward.custom_reward_function.path",
    "reward.custom_reward_function.name",
    "custom_reward_function.path",
    "custom_reward_function.name",
    "trainer.logger",
    "trainer.project_name",
    "trainer.experiment_name",
    "trainer.default_local_dir",
    "trainer.rollout_data_dir",
    "trainer.n_gpus_per_node",
    "trainer.nnodes",
    "trainer.total_epochs",
    "trainer.test_freq",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "trainer.val_before_train",
    "trainer.resume_mode",
    "trainer.critic_warmup",
    "trainer.device",
    "trainer.use_v1",
}


def flatten(data, prefix: str = "") -> dict:
    """A nested mapping as dotted keys (verl's override names)."""
    out = {}
    for key, value in (data or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out |= flatten(value, f"{name}.")
        else:
            out[name] = value
    return out


def from_verl(data: dict) -> tuple[dict, dict, list[str], list[str]]:
    """A verl config (nested, as its YAML) -> (GRPOConfig fields, extra fields, notes, errors)."""
    flat = flatten(data)
    fields: dict = {}
    extra: dict = {}
    notes: list[str] = []
    errors: list[str] = []
    estimator = flat.get("algorithm.adv_estimator", "gae")
    if estimator != "grpo":
        errors.append(f"algorithm.adv_estimator: {estimator!r}; grpo-web trains GRPO (set it to grpo)")
    if flat.get("algorithm.norm_adv_by_std_in_grpo") is False:
        fields["scale_rewards"] = "none"
    loss_agg = flat.get("actor_rollout_ref.actor.loss_agg_mode")
    if loss_agg is not None:
        matching = [t for t, mode in LOSS_AGG.items() if mode == loss_agg]
        if matching:
            fields["loss_type"] = matching[0]
        else:
            notes.append(
                f"actor_rollout_ref.actor.loss_agg_mode: {loss_agg!r} has no TRL loss_type; dapo's token-mean is used"
            )
    mode = flat.get("actor_rollout_ref.actor.policy_loss.loss_mode")
    if mode == "gspo":
        fields["importance_sampling_level"] = "sequence"
    elif mode in LOSS_MODE:
        fields["loss_type"] = LOSS_MODE[mode]
    elif mode not in (None, "vanilla"):
        notes.append(f"actor_rollout_ref.actor.policy_loss.loss_mode: {mode!r} is not applied (vanilla is used)")
    if flat.get("actor_rollout_ref.actor.use_kl_loss") is False:
        fields["beta"] = 0.0
    if flat.get("algorithm.use_kl_in_reward"):
        notes.append(
            "algorithm.use_kl_in_reward: a KL penalty in the reward is not applied; set beta (the KL "
            "loss, actor.kl_loss_coef) instead"
        )
    rank = _int(flat, "actor_rollout_ref.model.lora_rank", errors)
    if rank is not None and rank > 0:
        fields["use_peft"] = True
        fields["lora_r"] = rank
    warmup = _int(flat, "actor_rollout_ref.actor.optim.lr_warmup_steps", errors)
    ratio = _float(flat, "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", errors)
    if warmup is not None and warmup > 0:
        extra["warmup_steps"] = warmup
    elif ratio:
        extra["warmup_steps"] = ratio
    defaults, at_default = verl_defaults(), 0
    for key, value in flat.items():
        if key in FROM_VERL:
            name, convert = FROM_VERL[key]
            if value is None:
                continue  # verl's null: worked out by verl (total_training_steps from total_epochs), or unset
            try:
                fields[name] = convert(value)
            except (TypeError, ValueError):
                errors.append(f"{key}: {value!r} is not a valid value")
        elif key in MANAGED_VERL or key.startswith(("critic.", "reward_model.", "reward.", "defaults")):
            continue
        elif key.startswith("hydra") or key.startswith("_"):
            continue
        elif key in defaults and defaults[key] == value:
            at_default += 1  # verl's own value, which the run gets from verl anyway: no note
        elif defaults and key not in defaults:
            notes.append(f"{key}: not a key of verl {verl_version() or ''}'s config here; not applied")
        else:
            notes.append(f"{key}: not applied (no grpo-web field)")
    if at_default:
        notes.append(
            f"{at_default} more keys hold verl's own defaults (verl {verl_version() or '?'}): the run has them from "
            "verl; not listed"
        )
    if "actor_rollout_ref.actor.use_kl_loss" in flat and not flat["actor_rollout_ref.actor.use_kl_loss"]:
        fields["beta"] = 0.0
    _verl_steps(flat, fields, errors)
    n = fields.get("num_generations") or GRPOFields().num_generations
    notes += _verl_batches(flat, n, fields, errors)
    return fields, extra, notes, errors


def _int(flat: dict, key: str, errors: list[str]) -> int | None:
    value = flat.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str | float):
        errors.append(f"{key}: {value!r} is not a whole number")
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        errors.append(f"{key}: {value!r} is not a whole number")
        return None


def _float(flat: dict, key: str, errors: list[str]) -> float | None:
    value = flat.get(key)
    if value is None:
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, int | str | float):
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        errors.append(f"{key}: {value!r} is not a number")
        return None


def verl_gpus(flat: dict, errors: list[str]) -> int:
    """GPUs a verl config trains on: trainer.n_gpus_per_node x trainer.nnodes (1 x 1 where it sets neither)."""
    per_node = _int(flat, "trainer.n_gpus_per_node", errors) or 1
    nodes = _int(flat, "trainer.nnodes", errors) or 1
    return max(1, per_node) * max(1, nodes)


def _verl_steps(flat: dict, fields: dict, errors: list[str]) -> None:
    """verl's length and evaluation: total_training_steps wins; else total_epochs (left to the import, which knows
    the dataset's rows: num_train_epochs with max_steps -1); test_freq is the evaluation's every-N-steps."""
    if flat.get("trainer.total_training_steps") is None and flat.get("trainer.total_epochs") is not None:
        epochs = _int(flat, "trainer.total_epochs", errors)
        if epochs is not None:
            fields["max_steps"] = -1
            fields["num_train_epochs"] = epochs
    test_freq = _int(flat, "trainer.test_freq", errors)
    if test_freq is not None:
        fields["eval_steps"] = max(0, test_freq)  # verl's -1: no periodic validation


def _verl_batches(flat: dict, n: int, fields: dict, errors: list[str]) -> list[str]:
    """verl's batches as TRL's (workers.training.verl_run translates them back unchanged): data.train_batch_size
    prompts a step over all GPUs, actor.ppo_mini_batch_size prompts an optimizer update, ppo_micro_batch_size_per_gpu
    completions a forward pass on each GPU (verl's fsdp_workers multiply the mini-batch by rollout.n and divide it by
    the GPUs). TRL: per_device_train_batch_size completions a forward pass, gradient_accumulation_steps passes an
    update, steps_per_generation passes a generation batch."""
    keys = (
        "data.train_batch_size",
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    )
    if not any(flat.get(k) is not None for k in keys):
        return []
    gpus = verl_gpus(flat, errors)
    batch = _int(flat, keys[0], errors) or 1024  # verl's defaults (ppo_trainer.yaml)
    mini = _int(flat, keys[1], errors) or 256
    micro = _int(flat, keys[2], errors)
    if batch < 1 or mini < 1 or (micro is not None and micro < 1):
        errors.append(f"{keys[0]} / {keys[1]} / {keys[2]}: each must be at least 1")
        return []
    if mini > batch:
        errors.append(f"{keys[1]}: {mini} prompts an update is more than {keys[0]}: {batch} prompts a step")
        return []
    per_gpu = mini * n // gpus  # completions each GPU takes an update
    notes = []
    if micro is None:
        micro = per_gpu
        notes.append(f"{keys[2]}: not set; the whole per-GPU mini-batch ({per_gpu} completions) is one pass")
    if mini * n % gpus or per_gpu % micro:
        errors.append(
            f"{keys[2]}: {mini} prompts x {n} completions over {gpus} GPU(s) is {mini * n / gpus:g} completions "
            f"a GPU an update, not a multiple of {micro} (verl refuses it too)"
        )
        return notes
    accumulation = per_gpu // micro
    fields["per_device_train_batch_size"] = micro
    fields["gradient_accumulation_steps"] = accumulation
    fields["steps_per_generation"] = accumulation * (batch // mini)
    notes.append(
        f"{keys[0]}: {batch}, {keys[1]}: {mini}, {keys[2]}: {micro} on {gpus} GPU(s): as TRL's batches, "
        f"per_device_train_batch_size: {micro}, gradient_accumulation_steps: {accumulation}, "
        f"steps_per_generation: {fields['steps_per_generation']} (the same batches under TRL's names)"
        + (f"; {batch % mini} prompts of each step beyond whole mini-batches are dropped" if batch % mini else "")
    )
    return notes


@functools.cache
def verl_defaults() -> dict:
    """verl's own config defaults, flattened: its generated ppo_trainer.yaml (what ``python -m
    verl.trainer.main_ppo`` composes before overrides), interpolations resolved where OmegaConf is here. Read from
    the installed package without importing verl; {} where verl is not installed."""
    import yaml

    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    try:
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(OmegaConf.create(data), resolve=True)
    except Exception:  # noqa: BLE001 - an interpolation OmegaConf cannot resolve here: keep the text, noted then
        pass
    return flatten(data) if isinstance(data, dict) else {}


def verl_version() -> str | None:
    try:
        return importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return None
