"""The demo's own settings: the run form's starting values, and one template for each feature the demo advertises, on
the demo's models and datasets (runs.datasets.demo), as a TRL config YAML that fills the form the way an imported
config does. Each is a setup that shows its feature on a CPU.

What a config leaves out takes the trainer's default (TRL's GRPOConfig / SFTConfig), which is sized for real models
on GPUs: 512-token completions at a learning rate of 1e-6 for three epochs. The tiny demo model needs far less, and
far faster: these small values are the demo's, written into its form and templates, never into the defaults."""

from __future__ import annotations

from dataclasses import dataclass

# The run form's starting values for a GRPO run of the tiny model on a CPU: 30 steps of 16 completions, 16 tokens
# each, at a rate that moves the tiny model's curves within those steps
DEMO_GRPO = {
    "learning_rate": 1e-2,
    "max_steps": 30,
    "max_completion_length": 16,
    "per_device_train_batch_size": 16,
    "save_steps": 10,
}
# ... and for an SFT run (the tiny model's cold start, workers.training.coldstart, trains this way)
DEMO_SFT = {
    "max_length": 128,
    "completion_only_loss": True,
    "learning_rate": 3e-3,
    "max_steps": 30,
    "per_device_train_batch_size": 16,
    "lr_scheduler_type": "cosine",
    "gradient_checkpointing": False,
    "save_steps": 10,
}


@dataclass(frozen=True)
class DemoRun:
    label: str
    shows: str
    yaml: str


DEMO_RUNS = {
    "calculator": DemoRun(
        label="Tool calls",
        shows="tiny-tools calls the calculator at every step (TRL's tools/call_frequency stays up).",
        # A run of this setup (the training program alone, on CPU): at the demo form's 1e-2 the model called the tool
        # at steps 1-3 and never after; at 1e-4 it called it at every step of 20 (call frequency 0.88-1.0)
        yaml="""\
name: calculator demo
model_name_or_path: tiny-tools
dataset_name: arithmetic with a calculator (demo)
reward_funcs: [accuracy]
tools: [calculator]
learning_rate: 1.0e-4
max_steps: 20
num_generations: 4
per_device_train_batch_size: 8
max_completion_length: 48
save_steps: 10
""",
    ),
    "flips": DemoRun(
        label="Prompts that flip",
        shows="tiny-sft revisits the arithmetic prompts; some go from all wrong to solved (the run's Prompts page).",
        # 8 prompts a step over the 180 training rows: from step 23 on prompts come back. A run of this setup (the
        # training program alone, on CPU) had 92 of 157 prompts sampled twice and 13 flipped by step 34; accuracy held
        # at 3-6% of samples at this rate
        yaml="""\
name: prompts that flip
model_name_or_path: tiny-sft
dataset_name: arithmetic (demo)
reward_funcs: [accuracy, think_format]
learning_rate: 1.0e-3
max_steps: 40
num_generations: 4
per_device_train_batch_size: 32
max_completion_length: 24
save_steps: 10
""",
    ),
}
