"""A plain TRL GRPO script, as a user writes one, with the attach client's one line: no Django, nothing of
grpo-web but grpo_web_attach. python grpo_script.py MODEL OUTPUT_DIR [--resume] [--callback]

GRPO_WEB_URL and GRPO_WEB_TOKEN say where to send; KILL_AT_STEP=n kills this process (SIGKILL, nothing flushed)
at the end of optimizer step n, to test a resume from its checkpoint. TOKEN_SAMPLE_GROUPS=n: attach(...,
token_sample_groups=n); BETA and NUM_ITERATIONS: GRPOConfig's; WATCH_TRL=path: TRL's own per-token tensors at each
update, recorded by the tests' tracer (tests/trl_oracle.py), are written to path as JSON once training ends."""

import importlib.util
import os
import signal
import sys
from pathlib import Path

import grpo_web_attach
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer


def digit_ratio(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def sometimes_none(completions, answer, **kwargs):
    return [None if i % 3 == 0 else float(a in c) for i, (c, a) in enumerate(zip(completions, answer))]


class KillAt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == int(os.environ.get("KILL_AT_STEP", "0")):
            os.kill(os.getpid(), signal.SIGKILL)


def main():
    model, output_dir = sys.argv[1], sys.argv[2]
    rows = [{"prompt": f"What is {a} + {a + 1}?", "answer": str(2 * a + 1)} for a in range(32)]
    args = GRPOConfig(
        output_dir=output_dir,
        num_generations=4,
        per_device_train_batch_size=8,
        max_steps=int(os.environ.get("MAX_STEPS", "2")),
        beta=float(os.environ.get("BETA", "0")),
        num_iterations=int(os.environ.get("NUM_ITERATIONS", "1")),
        max_completion_length=12,
        learning_rate=1e-2,
        seed=11,
        log_completions=True,
        logging_steps=1,
        save_steps=1,
        save_only_model=False,
        report_to="none",
        gradient_checkpointing=False,
        use_cpu=True,
    )
    callbacks = [KillAt()]
    if "--callback" in sys.argv:
        callbacks.append(grpo_web_attach.GrpoWebCallback(name="attached by callback"))
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[digit_ratio, sometimes_none],
        args=args,
        train_dataset=Dataset.from_list(rows),
        callbacks=callbacks,
    )
    if "--callback" not in sys.argv:
        tokens = (
            {"token_sample_groups": int(os.environ["TOKEN_SAMPLE_GROUPS"])}
            if "TOKEN_SAMPLE_GROUPS" in os.environ
            else {}
        )
        grpo_web_attach.attach(trainer, name="attached", **tokens)
    if os.environ.get("WATCH_TRL"):
        spec = importlib.util.spec_from_file_location("trl_oracle", Path(__file__).parents[1] / "trl_oracle.py")
        oracle = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(oracle)
        with oracle.Watching(trainer) as calls:
            trainer.train()
        oracle.dump(calls, os.environ["WATCH_TRL"])
        return
    trainer.train(resume_from_checkpoint="--resume" in sys.argv)


if __name__ == "__main__":
    main()
