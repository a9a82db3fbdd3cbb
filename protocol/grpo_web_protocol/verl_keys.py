"""A run's config under verl's Hydra keys (its ``ppo_trainer.yaml`` with ``algorithm.adv_estimator=grpo``), and back.

``overrides`` gives the ``key=value`` list ``python -m verl.trainer.main_ppo`` takes; tests compose them onto verl's
own default config, so every key exists there. ``from_verl`` reads a verl config (a YAML a user brings) into the
run's GRPOConfig-named fields, with a note for each key it cannot carry over. No Django here.
"""

from __future__ import annotations

from grpo_web_protocol.config import GRPOFields, TrainConfig
from grpo_web_protocol.verl_carry import OWNED, carried, hydra_value, is_verl_key, shown
from grpo_web_protocol.verl_defaults import flatten, verl_defaults, verl_derived, verl_version  # noqa: F401

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
    # the keys a verl file set that no run field holds (verl_carry), as it wrote them: after grpo-web's own
    for key, value in config.extra.items():
        if is_verl_key(key) and key not in OWNED:
            values[key] = value
    if not flash_attn:  # verl's padding removal needs flash_attn: without it, whatever the file said, SDPA
        values["actor_rollout_ref.model.use_remove_padding"] = False
        values["+actor_rollout_ref.model.override_config.attn_implementation"] = "sdpa"
    return [f"{key}={_hydra(value)}" for key, value in values.items()]


def _hydra(value) -> str:
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        return value  # grpo-web's own list of loggers
    return hydra_value(value)


# verl key (dotted) -> (our field, the type verl's config holds it as, then how it reads as our field): what a verl
# YAML carries into the run form
FROM_VERL = {
    "actor_rollout_ref.rollout.n": ("num_generations", "int", None),
    "data.max_response_length": ("max_completion_length", "int", None),
    "actor_rollout_ref.rollout.temperature": ("temperature", "float", None),
    "actor_rollout_ref.rollout.top_p": ("top_p", "float", None),
    "actor_rollout_ref.rollout.top_k": ("top_k", "int", lambda v: max(0, v)),
    "actor_rollout_ref.rollout.gpu_memory_utilization": ("vllm_gpu_memory_utilization", "float", None),
    "actor_rollout_ref.actor.kl_loss_coef": ("beta", "float", None),
    "actor_rollout_ref.actor.clip_ratio_low": ("epsilon", "float", None),
    "actor_rollout_ref.actor.clip_ratio": ("epsilon", "float", None),
    "actor_rollout_ref.actor.clip_ratio_high": ("epsilon_high", "float", None),
    "actor_rollout_ref.actor.ppo_epochs": ("num_iterations", "int", None),
    "actor_rollout_ref.actor.grad_clip": ("max_grad_norm", "float", None),
    "actor_rollout_ref.actor.optim.lr": ("learning_rate", "float", None),
    "actor_rollout_ref.actor.optim.weight_decay": ("weight_decay", "float", None),
    "actor_rollout_ref.actor.optim.lr_scheduler_type": ("lr_scheduler_type", "str", None),
    "actor_rollout_ref.model.enable_gradient_checkpointing": ("gradient_checkpointing", "bool", None),
    "actor_rollout_ref.model.lora_alpha": ("lora_alpha", "int", None),
    "actor_rollout_ref.model.target_modules": ("lora_target_modules", "str", None),
    "trainer.total_training_steps": ("max_steps", "int", None),
    "trainer.save_freq": ("save_steps", "int", lambda v: max(0, v)),
    "trainer.max_actor_ckpt_to_keep": ("save_total_limit", "int", None),
    "data.seed": ("seed", "int", None),
}
# verl's boolean keys the import reads itself
VERL_BOOLS = (
    "algorithm.norm_adv_by_std_in_grpo",
    "algorithm.use_kl_in_reward",
    "actor_rollout_ref.actor.use_kl_loss",
)


class VerlTypeError(ValueError):
    """A value verl's typed config (OmegaConf) refuses; the message names the key, the value and the type."""


def omegaconf_value(key: str, value, kind: str):
    """``value`` as OmegaConf's typed node of ``kind`` (int, float, bool, str) takes it in verl's structured config
    (omegaconf.nodes: IntegerNode takes an int or its digits, FloatNode an int, a float or a number's text,
    BooleanNode a bool, an int (non-zero is true) or true/false/yes/no/on/off/y/n or digits in any case,
    StringNode any scalar); VerlTypeError for what it refuses ("maybe" is not a bool, 3.9 not an int)."""
    try:
        if kind == "int" and type(value) in (int, str):
            return int(value)
        if kind == "float" and type(value) in (int, float, str):
            return float(value)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if type(value) is int:
                return value != 0
            if isinstance(value, str):
                try:
                    return int(value) != 0
                except ValueError:
                    words = {"yes": True, "y": True, "on": True, "true": True}
                    words |= {"no": False, "n": False, "off": False, "false": False}
                    return words[value.lower()]
        if kind == "str" and not isinstance(value, dict | list):
            return str(value)
        if kind == "str" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return ",".join(value)  # verl's target_modules: a list of names, or one string
    except (ValueError, KeyError):
        pass
    expected = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "text"}[kind]
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    raise VerlTypeError(f"{key}: {text} is not {expected} ({kind}), as verl's config holds it; refused, not converted")


# verl keys from_verl reads into the run's fields itself (besides FROM_VERL): they come back to verl from the fields
TRANSLATED = {
    "algorithm.adv_estimator",
    "algorithm.norm_adv_by_std_in_grpo",
    "actor_rollout_ref.actor.use_kl_loss",
    "actor_rollout_ref.model.lora_rank",
    "actor_rollout_ref.actor.optim.lr_warmup_steps",
    "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
    "data.train_batch_size",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "trainer.total_epochs",
    "trainer.test_freq",
    "trainer.n_gpus_per_node",
    "trainer.nnodes",
}


def from_verl(data: dict, *, own_defaults: bool = False) -> tuple[dict, dict, list[str], list[str]]:
    """A verl config (nested, as its YAML) -> (GRPOConfig fields, extra fields, notes, errors). The extra fields
    hold the keys carried to verl as written, under their dotted names (verl_carry). ``own_defaults`` (a whole verl
    file, not Oumi's overrides of its own mapping): a key left out takes verl's own default."""
    flat = flatten(data)
    fields: dict = {}
    extra: dict = {}
    notes: list[str] = []
    errors: list[str] = []
    for key in [*FROM_VERL, *VERL_BOOLS]:  # flatten made a mapping given for one of them into keys below it
        inside = [k for k in flat if k.startswith(f"{key}.")]
        if inside:
            errors.append(f"{key}: a mapping ({', '.join(inside)}) where verl's config holds one value; refused")
            for k in inside:
                del flat[k]
    for key in VERL_BOOLS:  # read as verl's config holds them: "false" is false, "maybe" is refused
        if flat.get(key) is not None:
            try:
                flat[key] = omegaconf_value(key, flat[key], "bool")
            except VerlTypeError as exc:
                errors.append(str(exc))
                del flat[key]
    estimator = flat.get("algorithm.adv_estimator", "gae")
    if estimator != "grpo":
        said = "left empty" if estimator is None else repr(estimator)
        errors.append(f"algorithm.adv_estimator: {said}; grpo-web trains GRPO (set it to grpo)")
    if flat.get("algorithm.norm_adv_by_std_in_grpo") is False:
        fields["scale_rewards"] = "none"
    loss_agg = flat.get("actor_rollout_ref.actor.loss_agg_mode")
    if loss_agg is not None:
        matching = [t for t, mode in LOSS_AGG.items() if mode == loss_agg]
        if matching:
            fields["loss_type"] = matching[0]
        else:
            notes.append(
                f"actor_rollout_ref.actor.loss_agg_mode: {loss_agg!r} has no TRL loss_type; carried to verl as "
                "written (TRL, training this run, would refuse it)"
            )
    mode = flat.get("actor_rollout_ref.actor.policy_loss.loss_mode")
    if mode == "gspo":
        fields["importance_sampling_level"] = "sequence"
    elif mode in LOSS_MODE:
        fields["loss_type"] = LOSS_MODE[mode]
    elif mode not in (None, "vanilla"):
        notes.append(
            f"actor_rollout_ref.actor.policy_loss.loss_mode: {mode!r} has no TRL loss_type; carried to verl as written"
        )
    if flat.get("actor_rollout_ref.actor.use_kl_loss") is False:
        fields["beta"] = 0.0
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
    defaults = verl_defaults()
    translated = set(TRANSLATED)
    nulls: list[str] = []
    for key, value in flat.items():
        if key in FROM_VERL:
            translated.add(key)
            name, kind, then = FROM_VERL[key]
            if value is None:
                nulls.append(key)  # verl's null: worked out (total_training_steps from total_epochs), or unset
                continue
            try:
                value = omegaconf_value(key, value, kind)
            except VerlTypeError as exc:
                errors.append(str(exc))
                continue
            fields[name] = then(value) if then else value
    if loss_agg in LOSS_AGG.values():
        translated.add("actor_rollout_ref.actor.loss_agg_mode")
    if mode in (None, "vanilla", "gspo", *LOSS_MODE):
        translated.add("actor_rollout_ref.actor.policy_loss.loss_mode")
    if own_defaults:
        notes += _verl_field_defaults(flat, fields, defaults, errors)
        nulls += [k for k in FROM_VERL if k not in flat and defaults.get(k, 0) is None]
    notes += _verl_nulls(nulls, flat, fields)
    keep, more = carried(
        flat, translated, defaults, verl_version() or "?", left_out=own_defaults, derived=verl_derived()
    )
    extra |= keep
    notes += more
    if "actor_rollout_ref.actor.use_kl_loss" in flat and not flat["actor_rollout_ref.actor.use_kl_loss"]:
        fields["beta"] = 0.0
    if own_defaults and flat.get("trainer.total_training_steps") is None and "trainer.total_epochs" not in flat:
        if defaults.get("trainer.total_epochs") is not None:
            flat["trainer.total_epochs"] = defaults["trainer.total_epochs"]
            notes.append(
                f"trainer.total_epochs: left out, with no total_training_steps: verl's default "
                f"{defaults['trainer.total_epochs']} epochs"
            )
    _verl_steps(flat, fields, errors)
    n = fields.get("num_generations") or GRPOFields().num_generations
    notes += _verl_batches(flat, n, fields, errors, defaults if own_defaults else None)
    return fields, extra, notes, errors


def _verl_field_defaults(flat: dict, fields: dict, defaults: dict, errors: list[str]) -> list[str]:
    """The run fields a verl file's left-out keys leave at verl's own defaults (its ppo_trainer.yaml), not TRL's;
    one note names each that differs from TRL's, with both values."""
    said = []
    trl = GRPOFields()
    for key, (name, kind, then) in FROM_VERL.items():
        if key in flat or name in fields or defaults.get(key) in (None, "???"):
            continue
        value = omegaconf_value(key, defaults[key], kind)
        value = then(value) if then else value
        if name == "num_generations" and value < 2:
            errors.append(
                f"{key}: left out, so verl's default {value} completion a prompt, which GRPO cannot learn from "
                "(every advantage is zero); set it to 2 or more"
            )
            continue
        fields[name] = value
        if getattr(trl, name, value) != value:
            theirs = getattr(trl, name)
            said.append(f"{key} -> {name} {value!r} (TRL's default: {'unset' if theirs is None else repr(theirs)})")
    if (
        "actor_rollout_ref.actor.use_kl_loss" not in flat
        and defaults.get("actor_rollout_ref.actor.use_kl_loss") is False
    ):
        fields["beta"] = 0.0  # verl's default: no KL loss, so no reference model
        said.append("actor_rollout_ref.actor.use_kl_loss -> beta 0.0 (verl's default: no KL loss)")
    if not said:
        return []
    return [f"left out, so verl {verl_version() or '?'}'s own defaults, not TRL's: " + "; ".join(said)]


def _verl_nulls(keys: list[str], flat: dict, fields: dict) -> list[str]:
    """A note for each run field a verl null (given, or verl's default for a key left out) leaves to grpo-web, with
    the value the run gives verl instead."""
    notes = []
    for key in keys:
        name = FROM_VERL[key][0]
        if name in fields or key == "actor_rollout_ref.actor.clip_ratio":
            continue  # set by another spelling of it
        if key == "trainer.total_training_steps":
            notes.append(f"{key}: null: the run's max_steps is worked out from trainer.total_epochs, as verl does")
            continue
        said = "null" if key in flat else "left out, and verl's default is null"
        value = getattr(GRPOFields(), name)
        notes.append(f"{key}: {said} (verl leaves it unset); verl gets the run's {name} instead: {shown(value)}")
    return notes


def _int(flat: dict, key: str, errors: list[str]) -> int | None:
    return _typed(flat, key, "int", errors)


def _float(flat: dict, key: str, errors: list[str]) -> float | None:
    return _typed(flat, key, "float", errors)


def _typed(flat: dict, key: str, kind: str, errors: list[str]):
    """``flat[key]`` as verl's config holds it (omegaconf_value), None where unset or refused (with the error)."""
    value = flat.get(key)
    if value is None:
        return None
    try:
        return omegaconf_value(key, value, kind)
    except VerlTypeError as exc:
        errors.append(str(exc))
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


def _verl_batches(flat: dict, n: int, fields: dict, errors: list[str], defaults: dict | None = None) -> list[str]:
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
    if not any(flat.get(k) is not None for k in keys) and defaults is None:
        return []
    own = defaults or verl_defaults()
    gpus = verl_gpus(flat, errors)
    batch = _int(flat, keys[0], errors) or int(own.get(keys[0]) or 1024)  # verl's defaults (ppo_trainer.yaml)
    mini = _int(flat, keys[1], errors) or int(own.get(keys[1]) or 256)
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
