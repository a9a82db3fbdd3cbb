"""A user's own TRL script that logs to Trackio (report_to="trackio", log_completions=True): TRL writes the project,
through transformers' Trackio callback (metrics) and GRPOTrainer.log (completions tables). No Django; run by
tests/attach/test_import_trackio_project.py with Trackio on PYTHONPATH and TRACKIO_DIR set.

    python trackio_script.py MODEL OUTPUT_DIR
"""

import json
import sys

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer


def digits(completions, **kwargs):
    return [sum(c.isdigit() for c in text) / max(1, len(text)) for text in completions]


def has_answer(completions, answer, **kwargs):
    return [1.0 if a in text else None if not text.strip() else 0.0 for text, a in zip(completions, answer)]


model, output_dir = sys.argv[1], sys.argv[2]
rows = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a in range(4) for b in range(4)]
args = GRPOConfig(
    output_dir=output_dir,
    num_generations=4,
    per_device_train_batch_size=8,
    max_steps=2,
    max_completion_length=8,
    logging_steps=1,
    log_completions=True,
    report_to=["trackio"],
    project="grpo-trackio",
    run_name="tiny-run",
    save_strategy="no",
    use_cpu=True,
    bf16=False,
    seed=3,
    learning_rate=1e-3,
    reward_weights=[1.0, 0.5],
)
trainer = GRPOTrainer(model=model, reward_funcs=[digits, has_answer], args=args, train_dataset=Dataset.from_list(rows))
trainer.train()
# TRL's own record of what it logged, to compare the import with
with open(f"{output_dir}/log_history.json", "w") as fh:
    json.dump(trainer.state.log_history, fh)
