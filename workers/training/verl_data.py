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

from grpo_web_protocol.verl_dump import dump_event, read_dump

ANSWER_COLUMNS = ("answer", "solution", "ground_truth")  # the column verl shows as ground_truth, when the row has one


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
