"""A dataset version in verl's parquet layout, and verl's outputs (rollout dumps, file-logger metrics) as event-log
events, so a verl run is ingested like a TRL run. No Django, no verl import here.

verl's layout (its examples/data_preprocess/gsm8k.py): ``data_source``, ``prompt`` (chat messages), ``ability``,
``reward_model`` {``style``, ``ground_truth``}, ``extra_info``. The row's own columns travel in ``extra_info`` (as
JSON, so rows with different columns share one parquet schema) for the reward functions, which get them as TRL
passes them.
"""

from __future__ import annotations

import json
from pathlib import Path

from workers.training.protocol.verl_dump import dump_event, number, read_dump

ANSWER_COLUMNS = ("answer", "solution", "ground_truth")  # the column verl shows as ground_truth, when the row has one
# verl's metric names -> the TRL names the run pages chart; verl's own names are kept as well
METRIC_ALIASES = {
    "critic/score/mean": "reward",
    "critic/rewards/mean": "reward",
    "response_length/mean": "completions/mean_length",
    "response_length/max": "completions/max_length",
    "response_length/min": "completions/min_length",
    "response_length/clip_ratio": "completions/clipped_ratio",
    "actor/pg_loss": "loss",
    "actor/kl_loss": "kl",
    "actor/entropy": "entropy",
    "actor/grad_norm": "grad_norm",
    "actor/lr": "learning_rate",
    "timing_s/step": "timing/step_s",
    "timing_s/gen": "timing/generation_s",
    "timing_s/reward": "timing/reward_s",
}


def messages(prompt) -> list[dict]:
    if isinstance(prompt, list):
        return [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
    return [{"role": "user", "content": str(prompt)}]


def verl_rows(rows: list[dict], data_source: str, split: str) -> list[dict]:
    out = []
    for index, row in enumerate(rows):
        columns = {k: v for k, v in row.items() if k != "prompt"}
        truth = next((row[c] for c in ANSWER_COLUMNS if c in row), "")
        out.append(
            {
                "data_source": data_source,
                "prompt": messages(row["prompt"]),
                "ability": "grpo-web",
                "reward_model": {
                    "style": "rule",
                    "ground_truth": truth if isinstance(truth, str) else json.dumps(truth),
                },
                "extra_info": {
                    "split": split,
                    "index": index,
                    "prompt": json.dumps(row["prompt"]),
                    "columns": json.dumps(columns),
                },
            }
        )
    return out


def write_parquet(jsonl: str | Path, out: str | Path, *, data_source: str, split: str = "train") -> str:
    """The training program's JSONL (``prompt`` + reward columns) as verl's parquet."""
    import pandas as pd

    rows = [json.loads(line) for line in Path(jsonl).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{jsonl}: no rows")
    pd.DataFrame(verl_rows(rows, data_source, split)).to_parquet(out)
    return str(out)


def rollouts_event(dump: str | Path, reward_names: list[str], num_generations: int) -> dict:
    """One of verl's ``{step}.jsonl`` rollout dumps, with the capture's extra keys, as a "rollouts" event: rows in
    verl's order, grouped by verl's uid (the prompt's group), verl's score as the reward and its GRPO advantage."""
    lines = read_dump(dump)
    event, _ = dump_event(
        dump, lines, reward_keys_=[f"rewards/{name}" for name in reward_names], reward_names=reward_names
    )
    return {**event, "num_generations": num_generations}


def metrics_event(line: dict, max_steps: int) -> dict:
    """A line of verl's file logger ({"step", "data"}) as a "metrics" event, TRL's names beside verl's."""
    data = {
        k: number(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in line["data"].items()
    }
    data |= {alias: data[name] for name, alias in METRIC_ALIASES.items() if name in data and alias not in data}
    return {"type": "metrics", "step": int(line["step"]), "max_steps": max_steps, "metrics": data}
