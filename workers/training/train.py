"""The training program: ``python -m workers.training.train CONFIG.json``.

A plain process (no Django, no broker, no database). It trains with TRL's GRPOTrainer and appends what it sees to the
event log: TRL's logged metrics every step and, once per generation batch, every prompt, completion, per-function
reward and advantage exactly as TRL computed them. A config of kind "sft" trains with TRL's SFTTrainer instead
(``workers.training.sft``): the same event log, without rollouts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from grpo_web_attach import provenance
from grpo_web_protocol.config import PEFT_FIELDS, TrainConfig
from grpo_web_protocol.events import EventWriter, NullEventWriter

from workers.training import APP_FOLDER
from workers.training.rewarding import reward_functions
from workers.training.tooling import environment_factory, tool_functions


def grpo_config(config: TrainConfig):
    from trl import GRPOConfig

    from workers.training.trainargs import trainer_args

    server = {}
    if config.grpo.use_vllm and config.grpo.vllm_mode == "server" and config.vllm_server_port:
        server = dict(vllm_server_host="127.0.0.1", vllm_server_port=config.vllm_server_port)
    return trainer_args(
        GRPOConfig, config.grpo, output_dir=config.output_dir, extra=config.extra, exclude=PEFT_FIELDS, **server
    )


def peft_config(config: TrainConfig):
    """TRL's peft_config for a LoRA run (None trains every weight)."""
    if not config.grpo.use_peft:
        return None
    from peft import LoraConfig

    modules = config.grpo.lora_target_modules.strip()
    return LoraConfig(
        r=config.grpo.lora_r,
        lora_alpha=config.grpo.lora_alpha,
        lora_dropout=config.grpo.lora_dropout,
        target_modules=modules if modules == "all-linear" else [m.strip() for m in modules.split(",") if m.strip()],
        task_type="CAUSAL_LM",
    )


def save_final(trainer, output_dir: Path) -> None:
    """The final policy, loadable with from_pretrained: what "evaluate the final model" reads. A LoRA run saves it
    merged into the base weights, and its adapter alone in ``adapter/``."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):
        model.save_pretrained(str(output_dir / "adapter"))
        trainer.processing_class.save_pretrained(str(output_dir / "adapter"))
        merged = model.merge_and_unload()
        merged.save_pretrained(str(output_dir / "final"))
        trainer.processing_class.save_pretrained(str(output_dir / "final"))
    else:
        trainer.save_model(str(output_dir / "final"))


def make_trainer(config: TrainConfig, events: EventWriter | None, trainer_cls=None, **overrides):
    """Build the trainer; with ``events`` the capturing subclass and callback are attached."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from workers.training.capture import CapturingGRPOTrainer, MetricsCallback
    from workers.training.evaluate import eval_callback
    from workers.training.trainargs import skip_unused_search

    args = grpo_config(config)
    for key, value in overrides.items():
        setattr(args, key, value)
    if args.use_vllm and args.vllm_mode == "colocate":
        from workers.training.vllm_cpu import keep_weights_reloadable

        keep_weights_reloadable()  # on vLLM's CPU build only: TRL's weight sync loads each weight again
    rows = [json.loads(line) for line in Path(config.dataset_path).read_text().splitlines() if line.strip()]
    dataset = Dataset.from_list(rows)
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    model = AutoModelForCausalLM.from_pretrained(config.model)
    skip_unused_search(args, model)
    funcs, weights, closers = reward_functions(config, events)
    args.reward_weights = weights
    kwargs = dict(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config(config),
    )
    if config.tools or config.environment:
        if rows and not isinstance(rows[0].get("prompt"), list):
            raise ValueError(
                "tools: TRL calls tools only in chat conversations; the dataset's prompts are plain "
                "text. Map the prompt as a conversation (a list of messages), as the arithmetic-tools "
                "demo does."
            )
    if config.tools:
        tools, tool_closers = tool_functions(config, events)
        kwargs["tools"] = tools
        closers = closers + tool_closers
    if config.environment:
        factory, env_closers = environment_factory(config, events)
        kwargs["environment_factory"] = factory
        closers = closers + env_closers
    if events is None:
        trainer = (trainer_cls or GRPOTrainer)(**kwargs)
    else:
        trainer = (trainer_cls or CapturingGRPOTrainer)(
            events=events, tokens_dir=config.tokens_dir, token_sample_groups=config.token_sample_groups, **kwargs
        )
        trainer.add_callback(MetricsCallback(events, getattr(trainer, "step_timing", None)))
        # periodic evaluation on the eval split, scored by the same reward functions (sandboxes included)
        callback = eval_callback(trainer, config, events, funcs, weights, [r.name for r in config.rewards])
        if callback is not None:
            trainer.add_callback(callback)
    trainer.reward_closers = closers
    return trainer


def event_writer(config: TrainConfig) -> EventWriter | NullEventWriter | None:
    """One event log per run: rank 0 writes it; the other ranks of a multi-GPU run capture along (the capture
    gathers across processes) and write nothing."""
    if not config.capture:
        return None
    return EventWriter(config.event_log) if int(os.environ.get("RANK", "0") or 0) == 0 else NullEventWriter()


def run(config: TrainConfig) -> None:
    events = event_writer(config)
    Path(config.output_dir).mkdir(parents=True, exist_ok=True)
    (Path(config.output_dir) / "train_config.json").write_text(config.to_json())
    try:
        if config.kind == "sft":
            from workers.training.sft import make_sft_trainer

            trainer = make_sft_trainer(config, events)
        else:
            trainer = make_trainer(config, events)
        if events:
            events.write(
                "started",
                total_steps=config.max_steps,
                kind=config.kind,
                reward_names=[r.name for r in config.rewards],
                reward_weights=[r.weight for r in config.rewards],
                provenance=provenance.record(seed=trainer.args.seed, app=APP_FOLDER),
            )
        try:
            trainer.train(resume_from_checkpoint=config.resume_from_checkpoint)
            save_final(trainer, Path(config.output_dir))
        finally:
            for closer in trainer.reward_closers:
                closer.close()
    except BaseException as exc:
        if events:
            events.write("failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-4000:])
            events.close()
        raise
    if events:
        events.write("finished", step=trainer.state.global_step)
        events.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train one GRPO or SFT run from a grpo-web config file.")
    parser.add_argument("config", help="path to the run's train_config.json")
    args = parser.parse_args(argv)
    run(TrainConfig.load(args.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
