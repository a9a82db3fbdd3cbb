"""SFT runs inside the training program: TRL's SFTTrainer on a dataset version's rows, with the same event log as a
GRPO run (TRL's logged metrics every step, checkpoints, periodic evaluations), so the run page, resume, cancel and
compare treat both kinds alike. ``workers.training.train`` builds this trainer when the config's kind is "sft".

No Django here.
"""

from __future__ import annotations

import json
from pathlib import Path

from grpo_web_protocol.config import TrainConfig
from grpo_web_protocol.events import EventWriter


def sft_rows(rows: list[dict]) -> list[dict]:
    """The rows as TRL's SFTTrainer reads them.

    A row with ``messages`` is conversational language modelling; otherwise it is prompt-completion (``prompt`` as the
    dataset version maps it, ``completion`` from the column of that name). A conversational prompt (a list of
    messages) with a text completion gets the completion as the assistant's message, so TRL applies the chat
    template to both."""
    out = []
    for row in rows:
        if "messages" in row and row["messages"]:
            out.append({"messages": row["messages"]})
            continue
        prompt, completion = row["prompt"], row["completion"]
        if isinstance(prompt, list) and isinstance(completion, str):
            completion = [{"role": "assistant", "content": completion}]
        out.append({"prompt": prompt, "completion": completion})
    return out


def sft_config(config: TrainConfig):
    from trl import SFTConfig

    from workers.training.trainargs import trainer_args

    return trainer_args(SFTConfig, config.sft, output_dir=config.output_dir, extra=config.extra)


def make_sft_trainer(config: TrainConfig, events: EventWriter | None):
    """TRL's SFTTrainer with the metrics callback and, when the config asks, periodic evaluation scored by the run's
    reward functions (an SFT run's rewards only score its evaluations)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    from workers.training.capture import MetricsCallback
    from workers.training.evaluate import eval_callback
    from workers.training.rewarding import reward_functions
    from workers.training.trainargs import skip_unused_search

    rows = [json.loads(line) for line in Path(config.dataset_path).read_text().splitlines() if line.strip()]
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    model = AutoModelForCausalLM.from_pretrained(config.model)
    args = sft_config(config)
    skip_unused_search(args, model)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(sft_rows(rows)),
        processing_class=tokenizer,
    )
    trainer.reward_closers = []
    if events is not None:
        trainer.add_callback(MetricsCallback(events))
        if config.evaluation.eval_steps and config.rewards:
            funcs, weights, trainer.reward_closers = reward_functions(config, events)
            callback = eval_callback(trainer, config, events, funcs, weights, [r.name for r in config.rewards])
            if callback is not None:
                trainer.add_callback(callback)
    return trainer
