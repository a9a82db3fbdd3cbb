"""What GRPO and SFT runs set alike on TRL's config (GRPOConfig, SFTConfig): the run's fields, bf16 where the GPU
has it, checkpoints every ``save_steps``, logging every step, no reporting. No Django here."""

from __future__ import annotations

import dataclasses


def trainer_args(config_cls, fields, *, output_dir: str, extra: dict, exclude=(), **overrides):
    """``config_cls`` built from the dataclass ``fields`` (TRL's names; those in ``exclude`` are not the config's,
    such as the LoRA fields that build TRL's peft_config), ``extra`` (further fields of an imported TRL config) and
    ``overrides``."""
    import torch

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
