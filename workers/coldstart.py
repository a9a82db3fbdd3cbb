"""The R1 recipe's cold start, for the tiny model: a short supervised fine-tune (TRL's SFTTrainer) on worked
arithmetic answers in the ``<think>...</think> \\boxed{}`` format, so that an exact-answer reward fires now and then and
GRPO, pass@k and maj@k have signal. A random tiny model never answers correctly.

No Django here; offline (the data is generated locally).
"""

from __future__ import annotations

import json
from pathlib import Path


def cold_start_rows(n: int = 400, *, seed: int = 7) -> list[dict]:
    """Prompt-completion pairs in TRL's format: the demo's arithmetic prompts, answered with a short trace."""
    from runs.datasets.demo_data import arithmetic_rows

    rows = []
    for row in arithmetic_rows(n, seed=seed):
        expression = row["prompt"].removeprefix("What is ").rstrip("?")
        rows.append({"prompt": row["prompt"],
                     "completion": f"<think>{expression} = {row['answer']}</think> \\boxed{{{row['answer']}}}"})
    return rows


def cold_start(base: str | Path, out_dir: str | Path, *, steps: int = 120, seed: int = 0) -> Path:
    """Fine-tune the model folder ``base`` into ``out_dir`` (a model folder too) and return it."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    out = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base)
    args = SFTConfig(output_dir=str(out / "sft-tmp"), max_steps=steps, per_device_train_batch_size=32,
                     learning_rate=3e-3, lr_scheduler_type="cosine", logging_steps=steps, save_strategy="no",
                     report_to=[], disable_tqdm=True, seed=seed, bf16=False, use_cpu=not torch.cuda.is_available(),
                     dataloader_num_workers=0, completion_only_loss=True)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(cold_start_rows()),
                         processing_class=tokenizer)
    trainer.train()
    trainer.save_model(str(out))
    tokenizer.save_pretrained(out)
    info = out / "grpo_web.json"
    base_info = json.loads((Path(base) / "grpo_web.json").read_text()) if (Path(base) / "grpo_web.json").exists() else {}
    info.write_text(json.dumps({**base_info, "cold_start_steps": steps}))
    return out
