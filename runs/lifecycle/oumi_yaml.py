"""Oumi TrainingConfig files as the run YAML grpo-web reads (runs.lifecycle.trl_yaml), following Oumi's own mapping
(oumi-ai/oumi d8ed0777): ``TrainingParams.to_hf`` (what TRL's GRPOConfig or SFTConfig receives),
``GrpoParams.to_hf_trainer_kwargs``, ``TrainingConfig.__post_init__`` (model_max_length, Liger), ``oumi.train`` (the
LoRA of ``peft:`` when ``training.use_peft``, FSDP, the datasets) and ``VerlGrpoTrainer._create_config``.

Every key of the file is carried to the field TRL receives it as (under TRL's name where Oumi renames it, with a note
naming both), noted with the true reason it is not applied, or refused naming the key; none is dropped silently.
``trainer_type``: TRL_GRPO (a GRPO run trained by TRL), VERL_GRPO (by verl), TRL_SFT (an SFT run). Keys the file
leaves out that ``to_hf`` passes anyway take Oumi's default where it differs from TRL's, with a note. No database here.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from grpo_web_protocol.verl_keys import flatten, from_verl, verl_gpus

from runs.lifecycle.foreign_yaml import OWN_KEYS  # grpo-web's own keys, as a verl file's
from runs.lifecycle.oumi_keys import (
    DATASET_KEYS,
    DEEPSPEED_KEYS,
    FSDP_KEYS,
    GRPO_KEYS,
    MODEL_KEYS,
    NOT_IN_OUMI,
    OUMI_DEFAULTS,
    OUMI_ONLY,
    PEFT_DEFAULTS,
    PEFT_KEYS,
    SAME_NAME,
    SECTIONS,
    SET_BY_GRPO_WEB,
    SHUFFLED,
    SPLIT_KEYS,
    TO_TRL,
    TRAINERS,
    TRAINING_KEYS,
    VERL_GRPO_READS,
    VERL_READS,
)
from runs.lifecycle.trl_types import shown


class Reader:
    """The run YAML mapping being built, with the notes and errors of the keys read."""

    def __init__(self, kind: str, trainer_type: str):
        self.kind, self.trainer_type = kind, trainer_type
        self.out: dict = {}
        self.source: dict[str, str] = {}  # each field read from a key of the file: that key
        self.notes: list[str] = []
        self.errors: list[str] = []

    def note(self, key: str, text: str) -> None:
        self.notes.append(f"{key}: {text}")

    def error(self, key: str, text: str) -> None:
        self.errors.append(f"{key}: {text}")

    def carry(self, key: str, name: str, value) -> None:
        """``key``'s value as TRL's ``name`` (the TRL import then checks it as the rest of a TRL file)."""
        self.out[name] = value
        self.source[name] = key
        if key.rsplit(".", 1)[-1] != name:
            trainer = "verl" if self.kind == "verl" else "TRL"
            self.note(key, f"Oumi passes it to {trainer} as {name}; read as {name}: {shown(value)}")

    def mapping(self, key: str, value) -> dict | None:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(key, f"a mapping of Oumi's {key} settings, not {shown(value)}")
            return None
        return value

    def unknown(self, key: str, where: str) -> None:
        self.error(key, NOT_IN_OUMI.format(where))


def from_oumi_yaml(data: dict) -> tuple[dict, list[str], list[str]]:
    """An Oumi TrainingConfig -> (run YAML mapping, notes, errors)."""
    training = data.get("training")
    trainer_type = training.get("trainer_type") if isinstance(training, dict) else None
    own = {k: data[k] for k in OWN_KEYS if k in data}
    if trainer_type not in TRAINERS:
        said = "not given" if trainer_type is None else repr(trainer_type)
        kinds = "TRL_GRPO or VERL_GRPO (GRPO runs) and TRL_SFT (SFT runs)"
        return own, [], [f"training.trainer_type: {said}; grpo-web imports {kinds}"]
    r = Reader(TRAINERS[trainer_type], trainer_type)
    r.out["trainer"] = r.kind
    sections = {}
    for key, value in data.items():
        if key in OWN_KEYS:
            continue
        if key not in SECTIONS:
            r.unknown(key, "TrainingConfig")
            continue
        sections[key] = r.mapping(key, value)
    if any(v is None for v in sections.values()):
        return own, r.notes, r.errors
    training = dict(sections["training"])
    training.pop("trainer_type")
    _model(r, sections.get("model") or {})
    _data(r, sections.get("data") or {})
    use_peft = _training(r, training)
    _peft(r, sections.get("peft") or {}, use_peft)
    _distributed(r, "fsdp", sections.get("fsdp") or {}, FSDP_KEYS, "enable_fsdp")
    _distributed(r, "deepspeed", sections.get("deepspeed") or {}, DEEPSPEED_KEYS, "enable_deepspeed")
    _defaults(r, training)
    out = r.out
    if r.kind == "verl":
        overrides = training.get("verl_config_overrides") or {}
        if "requested_gpus" not in own:
            out["requested_gpus"] = verl_gpus(flatten(overrides if isinstance(overrides, dict) else {}), r.errors)
    out.setdefault("name", "imported Oumi run")
    out.update(own)
    return out, r.notes, r.errors


def _model(r: Reader, model: dict) -> None:
    for key, value in model.items():
        path = f"model.{key}"
        if key not in MODEL_KEYS:
            r.unknown(path, "ModelParams")
        elif key == "model_name":
            r.out["model_name_or_path"] = value
        elif key == "model_max_length" and value:
            if r.kind == "sft":  # TrainingConfig.__post_init__: trainer_kwargs["max_length"], over the file's own
                r.carry(path, "max_length", value)
            else:
                r.note(path, f"{shown(value)}: not applied: Oumi ignores it for {r.trainer_type} too (it logs so)")
        elif key == "enable_liger_kernel" and value:
            if r.kind == "verl":
                r.error(path, "Oumi refuses it for VERL_GRPO (an unrecognised trainer for Liger)")
            else:
                r.carry(path, "use_liger_kernel", True)
        elif key == "compile" and value:
            r.error(path, "Oumi refuses it: training.compile compiles the model for training")
        elif key in ("adapter_model", "freeze_layers") and value:
            r.error(path, "not applied by grpo-web (the run starts from the whole model, every weight trainable)")
        else:
            r.note(
                path,
                f"{shown(value)}: Oumi's model loading setting; not applied: the worker loads the model "
                f"folder with transformers' defaults",
            )


def _data(r: Reader, data: dict) -> None:
    for part, value in data.items():
        if part not in ("train", "validation", "test"):
            r.unknown(f"data.{part}", "DataParams")
            continue
        split = r.mapping(f"data.{part}", value)
        if split is None:
            continue
        for key, value in split.items():
            path = f"data.{part}.{key}"
            if key not in SPLIT_KEYS:
                r.unknown(path, "DatasetSplitParams")
            elif key == "datasets":
                _datasets(r, part, value)
            elif part != "train":
                r.note(path, _unused_split(part))
            else:
                _split_setting(r, path, key, value)


def _unused_split(part: str) -> str:
    if part == "validation":
        return "not applied: grpo-web evaluates on the dataset version's own eval split (every eval_steps)"
    return "not applied: Oumi's training does not read data.test either"


def _split_setting(r: Reader, path: str, key: str, value) -> None:
    if key == "pack":
        if r.kind == "sft":
            r.carry(path, "packing", bool(value))
        elif value:
            r.error(path, f"Oumi packs rows for language modelling; a {r.trainer_type} run trains on prompts")
        else:
            r.note(path, "false: rows are not packed, as in TRL")
    elif key in ("collator_name", "collator_kwargs", "train_target", "target_col") and value:
        how = (
            "grpo-web's SFT run uses TRL's own collator: set completion_only_loss or assistant_only_loss instead"
            if r.kind == "sft"
            else f"Oumi refuses a collator for {r.trainer_type} too"
        )
        r.error(path, f"{shown(value)}: Oumi's collator setting; {how}")
    elif key in ("mixture_strategy", "seed"):
        r.note(path, f"{shown(value)}: how Oumi mixes several datasets; grpo-web trains on one dataset version")
    else:
        r.note(path, f"{shown(value)}: how Oumi reads the rows (not which rows); grpo-web reads the version's rows")


def _datasets(r: Reader, part: str, datasets) -> None:
    key = f"data.{part}.datasets"
    if not isinstance(datasets, list) or not all(isinstance(d, dict) for d in datasets):
        r.error(key, "a list of datasets, each with its dataset_name")
        return
    for i, entry in enumerate(datasets):
        for name, value in entry.items():
            path = f"{key}[{i}].{name}"
            if name not in DATASET_KEYS:
                r.unknown(path, "DatasetParams")
            elif part != "train":
                r.note(path, f"{shown(value)}: " + _unused_split(part))
            elif i > 0:
                r.note(
                    path,
                    f"{shown(value)}: not applied: only the first dataset trains; mix datasets into one "
                    f"version on its page",
                )
            else:
                _dataset_setting(r, path, name, value, entry)


def _dataset_setting(r: Reader, path: str, name: str, value, entry: dict) -> None:
    if name == "dataset_name":
        if entry.get("dataset_path"):
            r.note(path, f"{shown(value)} is the Oumi loader that reads dataset_path")
        else:
            r.out["dataset_name"] = value
    elif name == "dataset_path" and value:
        dataset = PurePosixPath(str(value)).stem or PurePosixPath(str(value)).name
        r.out["dataset_name"] = dataset
        r.note(
            path,
            f"{shown(value)} read as your dataset {dataset!r} (upload that file on the Datasets page under "
            f"that name); set dataset_name to pick another",
        )
    elif name == "split":
        r.note(
            path,
            f"{shown(value)}: not applied: the dataset version's own split decides which rows train (set it "
            f"on the dataset's mapping page)",
        )
    elif name == "subset":
        r.note(
            path,
            f"{shown(value)}: the Hub config; not applied: grpo-web trains on the dataset version named by "
            f"dataset_name (pick the Hub config when importing the dataset)",
        )
    elif name == "dataset_kwargs":
        r.note(
            path,
            f"{shown(value)}: arguments of Oumi's dataset class; not applied: grpo-web reads the version's "
            f"rows as its mapping says",
        )
    elif name == "sample_count" and value is not None:
        r.error(
            path,
            f"{shown(value)}: Oumi trains on that many rows; grpo-web trains on all of the version's: "
            f"make a version of that many rows",
        )
    elif name in ("shuffle", "seed", "shuffle_buffer_size"):
        r.note(path, f"{shown(value)}: {SHUFFLED}")
    else:  # mixture_proportion (one dataset), trust_remote_code, transform_num_workers, an empty dataset_path
        r.note(path, f"{shown(value)}: how Oumi loads the rows (not which rows); grpo-web reads the version's rows")


def _training(r: Reader, training: dict) -> bool:
    """training.*; returns whether Oumi builds the LoRA of ``peft:`` (training.use_peft, TRL trainers only)."""
    use_peft = bool(training.get("use_peft")) and r.kind != "verl"
    for key, value in training.items():
        path = f"training.{key}"
        if key not in TRAINING_KEYS:
            r.unknown(path, "TrainingParams")
        elif r.kind == "verl" and key not in VERL_READS:
            r.note(
                path,
                f"{shown(value)}: Oumi's VERL_GRPO trainer does not pass it to verl (verl takes its own "
                f"setting or verl_config_overrides'); not applied, as in Oumi",
            )
        elif key in SAME_NAME:
            r.carry(path, key, value)
        elif key in TO_TRL:
            if key == "include_performance_metrics" and value and r.kind == "grpo":
                r.error(path, "Oumi refuses it for TRL_GRPO")
            else:
                r.carry(path, TO_TRL[key], value)
        elif key in SET_BY_GRPO_WEB:
            r.note(path, f"Oumi turns it into the trainer's {SET_BY_GRPO_WEB[key]}; the imported value is not applied")
        elif key in OUMI_ONLY:
            r.note(path, f"Oumi's own setting ({OUMI_ONLY[key]}); TRL never receives it: not applied")
        elif key == "run_name":
            r.out["name"] = value
        elif key == "reward_functions":
            if r.kind == "sft" and isinstance(value, list) and any(value):
                r.error(path, "Oumi refuses reward functions for TRL_SFT (they are for TRL_GRPO and VERL_GRPO)")
            else:
                r.out["reward_funcs"] = value
        else:
            _training_special(r, path, key, value, training, use_peft)
    return use_peft


def _training_special(r: Reader, path: str, key: str, value, training: dict, use_peft: bool) -> None:
    if key == "save_steps":
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            r.out["save_steps"] = 0
            r.note(
                path,
                f"{value}: Oumi saves no checkpoint on the way (TRL: save_strategy 'no'; verl: the final "
                f"step's only); read as save_steps: 0 (grpo-web saves the final model of every run)",
            )
        else:
            r.out["save_steps"] = value
    elif key == "save_epoch":
        steps = training.get("save_steps", 500)
        if not value:
            r.note(path, "false (Oumi's default): checkpoints every save_steps")
        elif isinstance(steps, int) and steps > 0:
            r.note(path, f"no effect, as in Oumi: save_steps {steps} is above 0, so Oumi saves every {steps} steps")
        else:
            r.error(path, "grpo-web checkpoints every save_steps steps, not every epoch: set save_steps")
    elif key == "save_final_model":
        r.note(path, f"{shown(value)}: grpo-web saves every run's final model (the run page downloads it)")
    elif key == "max_grad_norm":
        r.carry(path, "max_grad_norm", 0.0 if value is None else value)
        if value is None:
            r.note(path, "null: Oumi passes max_grad_norm 0.0 (no clipping) to TRL; read as max_grad_norm: 0.0")
    elif key == "mixed_precision_dtype":
        _precision(r, path, value)
    elif key == "use_deterministic":
        _deterministic(r, path, value)
    elif key == "dataloader_main_process_only":
        r.carry(
            path,
            "accelerator_config",
            {"dispatch_batches": value, "split_batches": False, "even_batches": True, "use_seedable_sampler": True},
        )
    elif key == "dataloader_prefetch_factor":
        r.note(
            path,
            f"{shown(value)}: Oumi passes it only with dataloader workers; grpo-web loads batches in the "
            f"training process (dataloader_num_workers 0), where TRL takes no prefetch factor",
        )
    elif key == "resume_from_checkpoint" and value:
        r.error(
            path,
            f"{shown(value)}: a folder on Oumi's machine; resume a grpo-web run from its own checkpoints (Resume "
            f"on the run page)",
        )
    elif key == "metrics_function" and value:
        refused = f" (Oumi refuses it for {r.trainer_type} too)" if r.kind != "sft" else ""
        r.error(
            path,
            f"{shown(value)}: an Oumi registry function{refused}; grpo-web's evaluations score with the run's "
            f"reward functions",
        )
    elif key == "try_resume_from_last_checkpoint":
        r.note(
            path,
            f"{shown(value)}: Oumi resumes from output_dir's last checkpoint; a grpo-web run starts in its "
            f"own new folder (resume a run from its page)",
        )
    elif key == "reward_function_kwargs" and value:
        r.error(
            path,
            f"{shown(value)}: Oumi binds them to its reward functions; grpo-web's take TRL's arguments only "
            f"(set them as constants in your function's code)",
        )
    elif key == "use_peft":
        if r.kind == "verl":
            r.note(
                path,
                f"{shown(value)}: Oumi's VERL_GRPO trainer does not read it (verl's LoRA is "
                f"actor_rollout_ref.model.lora_rank in verl_config_overrides)",
            )
        elif value and r.kind == "sft":
            r.error(path, "grpo-web's SFT runs train every weight (no LoRA); a GRPO run can train LoRA")
        else:
            r.out["use_peft"] = bool(value)
    elif key == "grpo":
        _grpo(r, value)
    elif key == "trainer_kwargs":
        _trainer_kwargs(r, value, training)
    elif key == "verl_config_overrides":
        _verl_overrides(r, value)
    else:  # reward_function_kwargs, resume_from_checkpoint, metrics_function left empty
        r.note(path, f"{shown(value)}: left empty; nothing to apply")


def _precision(r: Reader, path: str, value) -> None:
    """to_hf: fp16 = (mixed_precision_dtype == FP16), bf16 = (== BF16)."""
    said = str(value).lower() if value is not None else "none"
    if said not in ("none", "fp16", "bf16"):
        r.error(path, f"{shown(value)}: Oumi's mixed precision is NONE, FP16 or BF16")
        return
    r.out["bf16"] = said == "bf16"
    if said == "fp16":
        r.out["fp16"] = True
    r.note(path, f"{shown(value)}: Oumi passes bf16 {said == 'bf16'}, fp16 {said == 'fp16'} to TRL; read so")


def _deterministic(r: Reader, path: str, value) -> None:
    """to_hf with use_deterministic: no gradient checkpointing, no batch dispatch, no unused-weight search, DDP's
    buffers broadcast."""
    if not value:
        r.note(path, "false (Oumi's default): nothing changes")
        return
    r.out.update(gradient_checkpointing=False, ddp_find_unused_parameters=False, ddp_broadcast_buffers=True)
    r.out["accelerator_config"] = {
        "dispatch_batches": False,
        "split_batches": False,
        "even_batches": True,
        "use_seedable_sampler": True,
    }
    r.note(
        path,
        "true: Oumi passes gradient_checkpointing false, ddp_find_unused_parameters false, "
        "ddp_broadcast_buffers true and accelerator_config dispatch_batches false to TRL; read so",
    )


def _grpo(r: Reader, grpo) -> None:
    grpo = r.mapping("training.grpo", grpo)
    if grpo is None:
        return
    for key, value in grpo.items():
        path = f"training.grpo.{key}"
        if key not in GRPO_KEYS:
            r.unknown(path, "GrpoParams")
        elif r.kind == "sft":
            r.note(
                path,
                f"{shown(value)}: Oumi reads training.grpo for TRL_GRPO and VERL_GRPO only; not applied, as in Oumi",
            )
        elif r.kind == "verl" and key not in VERL_GRPO_READS:
            r.note(
                path,
                f"{shown(value)}: Oumi's VERL_GRPO trainer does not pass it to verl (verl takes its own "
                f"setting or verl_config_overrides'); not applied, as in Oumi",
            )
        elif key == "rollout_function" and value:
            r.error(
                path,
                f"{shown(value)}: an Oumi registry rollout; grpo-web generates with TRL's own (or use an environment)",
            )
        elif key.startswith("vllm_") and not grpo.get("use_vllm") and r.kind == "grpo":
            r.note(path, f"{shown(value)}: Oumi passes it only with use_vllm: true; not applied, as in Oumi")
        elif key == "rollout_function" or (key == "model_init_kwargs" and not value):
            r.note(path, f"{shown(value)}: left empty; nothing to apply")
        else:
            r.carry(path, key, value)  # GrpoParams.to_hf_trainer_kwargs: GRPOConfig's own names


def _trainer_kwargs(r: Reader, kwargs, training: dict) -> None:
    kwargs = r.mapping("training.trainer_kwargs", kwargs)
    if kwargs is None:
        return
    grpo = _grpo_kwargs(training.get("grpo")) if r.kind == "grpo" else set()
    for key, value in kwargs.items():
        path = f"training.trainer_kwargs.{key}"
        if key in grpo:  # to_hf: "trainer_kwargs attempt to override the following GRPO kwargs"
            r.error(path, f"Oumi refuses it: training.grpo passes {key} to GRPOConfig (set it there)")
        elif key in ("max_length", "use_liger_kernel") and r.source.get(key, "").startswith("model."):
            # TrainingConfig.__post_init__ writes the model's value over the trainer_kwargs one
            r.note(path, f"{shown(value)} gives way to {r.source[key]} (Oumi overrides it), as in Oumi")
        else:
            r.out[key] = value  # Oumi passes them to the TRL trainer's config: its names, read as the rest of the file
            r.note(path, f"read as {key}: {shown(value)}")


def _grpo_kwargs(grpo) -> set[str]:
    """The GRPOConfig keys GrpoParams.to_hf_trainer_kwargs passes (Oumi's defaults included)."""
    grpo = grpo if isinstance(grpo, dict) else {}
    keys = {"temperature", "remove_unused_columns", "repetition_penalty", "use_vllm", "epsilon", "log_completions"}
    keys |= {
        k for k in ("model_init_kwargs", "max_prompt_length", "max_completion_length", "num_generations") if grpo.get(k)
    }
    if grpo.get("use_vllm"):
        keys |= {"vllm_gpu_memory_utilization"} | ({"vllm_mode"} if grpo.get("vllm_mode") is not None else set())
    return keys


def _verl_overrides(r: Reader, overrides) -> None:
    if r.kind != "verl":
        r.note(
            "training.verl_config_overrides",
            f"Oumi reads it for VERL_GRPO only; a {r.trainer_type} run does not use it",
        )
        return
    if not isinstance(overrides, dict):
        r.error("training.verl_config_overrides", "a mapping of verl's config keys")
        return
    # Oumi sets adv_estimator: grpo, then merges the overrides into verl's config (OmegaConf.merge)
    fields, extra, more, errs = from_verl(_merged({"algorithm": {"adv_estimator": "grpo"}}, overrides))
    for name, value in fields.items():
        if name in r.source and r.out.get(name) != value:
            r.note(
                r.source[name],
                f"{shown(r.out[name])} gives way to verl_config_overrides' {shown(value)} (Oumi "
                f"merges the overrides last); read as {name}: {shown(value)}",
            )
    r.out.update(fields)
    r.out.update(extra)
    r.notes += [f"training.verl_config_overrides: {n}" for n in more]
    r.errors += errs


def _peft(r: Reader, peft: dict, use_peft: bool) -> None:
    """peft.*: oumi.train builds PeftParams.to_lora() into the model when training.use_peft (TRL trainers)."""
    for key, value in peft.items():
        path = f"peft.{key}"
        if key not in PEFT_KEYS:
            r.unknown(path, "PeftParams")
        elif r.kind == "verl":
            r.note(
                path,
                f"{shown(value)}: Oumi's VERL_GRPO trainer does not read peft (verl's LoRA is "
                f"actor_rollout_ref.model.lora_rank in verl_config_overrides); not applied, as in Oumi",
            )
        elif not use_peft:
            r.note(path, f"{shown(value)}: training.use_peft is not true, so Oumi builds no LoRA either; not applied")
        elif key in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"):
            if key == "lora_target_modules" and value is None:
                r.note(
                    path,
                    "null: PEFT picks the architecture's modules in Oumi; grpo-web puts adapters on every "
                    "linear layer ('all-linear')",
                )
            else:
                r.out[key] = value
        elif key == "q_lora" and value:
            r.error(path, "grpo-web's LoRA trains in full precision (no quantisation)")
        elif key in ("lora_bias", "lora_task_type", "lora_init_weights", "peft_save_mode"):
            _peft_choice(r, path, key, value)
        elif key in ("lora_exclude_modules", "lora_target_parameters", "lora_modules_to_save") and value:
            r.error(
                path,
                f"{shown(value)}: grpo-web's LoRA takes lora_r, lora_alpha, lora_dropout and lora_target_modules only",
            )
        else:  # quantisation settings without q_lora, empty module lists
            r.note(path, f"{shown(value)}: no effect without q_lora (or left empty), as in Oumi")
    if use_peft and r.kind == "grpo":
        for key, value in PEFT_DEFAULTS.items():
            if key not in peft:
                r.out[key] = value
                r.note(f"peft.{key}", f"left out; Oumi's LoRA takes its default {value}: read as {key}: {value}")
        if "lora_target_modules" not in peft:
            r.note(
                "peft.lora_target_modules",
                "left out: PEFT picks the architecture's modules in Oumi; grpo-web "
                "puts adapters on every linear layer ('all-linear')",
            )


def _peft_choice(r: Reader, path: str, key: str, value) -> None:
    same = {
        "lora_bias": "none",
        "lora_task_type": "causal_lm",
        "lora_init_weights": "default",
        "peft_save_mode": None,
    }[key]
    if key == "peft_save_mode":
        r.note(path, f"{shown(value)}: grpo-web saves the adapter and the merged model of every LoRA run")
    elif str(value).lower() == same:
        r.note(path, f"{shown(value)}: as grpo-web's LoRA does")
    else:
        r.error(path, f"{shown(value)}: grpo-web's LoRA takes {same!r} only")


def _distributed(r: Reader, section: str, params: dict, known: frozenset, switch: str) -> None:
    on = bool(params.get(switch))
    for key, value in params.items():
        path = f"{section}.{key}"
        if key not in known:
            r.unknown(path, f"{section} params")
        elif r.kind == "verl":
            r.note(
                path,
                f"{shown(value)}: Oumi's VERL_GRPO trainer does not read it (verl shards with its own FSDP, "
                f"set in verl_config_overrides); not applied, as in Oumi",
            )
        elif not on:
            r.note(path, f"{shown(value)}: {section}.{switch} is not true, so Oumi does not use it either")
        else:
            r.note(
                path,
                f"{shown(value)}: not applied: grpo-web trains data-parallel (DDP, or DeepSpeed under your "
                f"own accelerate launch) on the run's GPUs, each holding the whole model; {section} shards it "
                f"across them: the same updates, less memory per GPU",
            )


def _defaults(r: Reader, training: dict) -> None:
    """What to_hf (and VerlGrpoTrainer) passes for a key the file leaves out, where Oumi's default is not TRL's."""
    grpo = training.get("grpo") if isinstance(training.get("grpo"), dict) else {}
    for name, (where, value, kinds) in OUMI_DEFAULTS.items():
        section, key = where.rsplit(".", 1)
        given = key in (grpo if section == "training.grpo" else training)
        if r.kind not in kinds or given or name in r.out:
            continue
        r.out[name] = value
        r.note(
            where,
            f"left out; Oumi passes its default {shown(value)} to "
            f"{'verl' if r.kind == 'verl' else 'TRL'}: read as {name}: {shown(value)}",
        )
    # GrpoParams passes vllm_gpu_memory_utilization to TRL only with use_vllm; the verl trainer passes it always
    if (r.kind == "verl" or (r.kind == "grpo" and grpo.get("use_vllm"))) and "vllm_gpu_memory_utilization" not in grpo:
        if "vllm_gpu_memory_utilization" not in r.out:
            r.out["vllm_gpu_memory_utilization"] = 0.9
            r.note(
                "training.grpo.vllm_gpu_memory_utilization",
                "left out; Oumi passes its default 0.9 (TRL's is 0.3): read as vllm_gpu_memory_utilization: 0.9",
            )


def _merged(base: dict, more) -> dict:
    """``more`` merged into ``base`` key by key, nested mappings too (as OmegaConf.merge does)."""
    if not isinstance(more, dict):
        return base
    out = dict(base)
    for key, value in more.items():
        out[key] = _merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out
