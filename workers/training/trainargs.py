"""What GRPO and SFT runs set alike on TRL's config (GRPOConfig, SFTConfig): the run's fields, bf16 where the GPU
has it, checkpoints every ``save_steps``, logging every step, no reporting. No Django here."""

from __future__ import annotations

import dataclasses


def trainer_args(config_cls, fields, *, output_dir: str, extra: dict, exclude=(), **overrides):
    """``config_cls`` built from the dataclass ``fields`` (TRL's names; those in ``exclude`` are not the config's,
    such as the LoRA fields that build TRL's peft_config), ``extra`` (further fields of an imported TRL config) and
    ``overrides``. verl's settings a verl file carried (dotted names, grpo_web_protocol.verl_carry) are not
    TRL's: the check before the run is queued refuses those TRL would lose; the rest restate verl's defaults."""
    import torch

    extra = {k: v for k, v in extra.items() if "." not in k}

    values = {k: v for k, v in dataclasses.asdict(fields).items() if v is not None and k not in exclude}
    bf16 = values.pop("bf16")
    values["bf16"] = (torch.cuda.is_available() and torch.cuda.is_bf16_supported()) if bf16 == "auto" else bf16 == "yes"
    save_steps = values.pop("save_steps")
    return config_cls(
        output_dir=output_dir,
        **extra,
        **values,
        **overrides,
        use_cpu=not torch.cuda.is_available(),
        logging_steps=1,
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


# what a model's config names when its batches can leave trainable weights without a gradient: experts no token was
# routed to, a vision or audio tower under text-only prompts
SPARSE_KEYS = (
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "moe_num_experts",
    "vision_config",
    "audio_config",
)


def skip_unused_search(args, model) -> None:
    """Turn off DDP's search for weights the loss left without a gradient, where no weight can be left so.

    transformers turns the search on whenever gradient checkpointing is off; in a run of several processes (Ray Train
    workers, accelerate's processes) it then costs every rank, every step, a walk of the autograd graph after the
    forward and an extra allreduce in the backward: a tenth to a fifth more CPU in the update, and 2 processes of the
    tiny model (torchrun, 128 completions a step each) did 1.48 times what one does instead of 1.73. Every trainable
    weight of a dense causal LM (LoRA's included) gets a gradient, so the search stays on only where the run sets
    ``ddp_find_unused_parameters`` itself or the model has experts or a vision or audio tower. A process without a
    process group has no DDP: nothing changes there."""
    if args.ddp_find_unused_parameters is not None:
        return
    configs = [model.config, getattr(model.config, "text_config", None)]
    if any(getattr(c, key, None) for c in configs if c is not None for key in SPARSE_KEYS):
        return
    args.ddp_find_unused_parameters = False
