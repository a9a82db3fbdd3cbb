"""The R1 recipe's cold start, for the tiny model: a short supervised fine-tune (TRL's SFTTrainer) on worked
arithmetic answers in the ``<think>...</think> \\boxed{}`` format, so that an exact-answer reward fires now and then and
GRPO, pass@k and maj@k have signal. A random tiny model never answers correctly.

No Django here; offline (the data is generated locally).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from grpo_web_protocol.demo_data import arithmetic_tool_rows, worked_answer_rows

from rewards.library import source
from rewards.toolspec import stand_in, tool_signature
from workers.training.tinymodel import build_tiny_model


def cold_start_rows(n: int = 400, *, seed: int = 7) -> list[dict]:
    """Prompt-completion pairs in TRL's format: the demo's arithmetic prompts, answered with a short trace."""
    return [{"prompt": r["prompt"], "completion": r["completion"]} for r in worked_answer_rows(n, seed=seed)]


def tool_cold_start_rows(n: int = 400, *, seed: int = 7) -> list[dict]:
    """Conversations that call the ``calculator`` tool and box its result, in TRL's conversational prompt-completion
    format with the tool schemas in a ``tools`` column: the cold start of the tool demo's model (tiny-tools-sft),
    so that a GRPO run with the calculator sees tool calls from its first step."""
    from transformers.utils import get_json_schema

    # the schema TRL shows the model in a run (transformers' get_json_schema of the tool's signature), as JSON text:
    # SFTTrainer reads a ``tools`` column of JSON text
    schema = get_json_schema(stand_in(tool_signature(source("calculator"), "calculator"), None))
    tools = json.dumps([schema])
    rows = []
    for row in arithmetic_tool_rows(n, seed=seed):
        expression = row["prompt"][0]["content"].removeprefix("What is ").split("?")[0]
        call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}
        rows.append(
            {
                "prompt": row["prompt"],
                "completion": [
                    {"role": "assistant", "content": "", "tool_calls": [call]},
                    {"role": "tool", "name": "calculator", "content": row["answer"]},
                    {"role": "assistant", "content": f"\\boxed{{{row['answer']}}}"},
                ],
                "tools": tools,
            }
        )
    return rows


def cold_start(
    base: str | Path,
    out_dir: str | Path,
    *,
    steps: int = 120,
    seed: int = 0,
    tools: bool = False,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
) -> Path:
    """Fine-tune the model folder ``base`` into ``out_dir`` (a model folder too) and return it. ``tools``: on
    conversations that call the calculator (``tool_cold_start_rows``)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    out = Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base)
    args = SFTConfig(
        output_dir=str(out / "sft-tmp"),
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        lr_scheduler_type="cosine",
        logging_steps=steps,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=seed,
        bf16=False,
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        completion_only_loss=True,
    )
    rows = tool_cold_start_rows() if tools else cold_start_rows()
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    trainer.train()
    trainer.save_model(str(out))
    tokenizer.save_pretrained(out)
    info = out / "grpo_web.json"
    base_info = (
        json.loads((Path(base) / "grpo_web.json").read_text()) if (Path(base) / "grpo_web.json").exists() else {}
    )
    info.write_text(json.dumps({**base_info, "cold_start_steps": steps}))
    return out


TOOL_STEPS = 240


def build_tool_model(out_dir: str | Path, *, steps: int = TOOL_STEPS, seed: int = 0) -> Path:
    """The tool demo's model ('tiny-tools'): the tiny model with its Qwen-style tool chat template
    (``build_tiny_model(tools=True)``), cold-started on calculator calls so that it calls the tool from a GRPO run's
    first step. Offline, a minute or two on a CPU."""
    with tempfile.TemporaryDirectory() as base:
        build_tiny_model(base, tools=True, seed=seed)
        return cold_start(base, out_dir, steps=steps, seed=seed, tools=True, batch_size=16, learning_rate=1e-2)
