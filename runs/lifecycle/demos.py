"""The run form's demo templates: one run for each feature the demo advertises, on the demo's models and datasets
(runs.datasets.demo), as a TRL config YAML that fills the form the way an imported config does. Each is a setup
that shows its feature on a CPU."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DemoRun:
    label: str
    shows: str
    yaml: str


DEMO_RUNS = {
    "calculator": DemoRun(
        label="Tool calls",
        shows="tiny-tools calls the calculator at every step (TRL's tools/call_frequency stays up).",
        # A run of this setup (the training program alone, on CPU): at the form's default 1e-2 the model called the tool
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
""",
    ),
}
