"""A dataset version in verl's parquet layout, and verl's outputs (rollout dumps, file-logger metrics) as event-log
events, so a verl run is ingested like a TRL run. No Django, no verl import here.

verl's layout (its examples/data_preprocess/gsm8k.py): ``data_source``, ``prompt`` (chat messages), ``ability``,
``reward_model`` {``style``, ``ground_truth``}, ``extra_info``. The row's own columns travel in ``extra_info`` (as
JSON, so rows with different columns share one parquet schema) for the reward functions, which get them as TRL
passes them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

ANSWER_COLUMNS = ("answer", "solution", "ground_truth")  # the column verl shows as ground_truth, when the row has one
# extra keys the capture adds to verl's dump beside its own (input, output, gts, score, step)
GROUP_KEY, ADVANTAGE_KEY, LENGTH_KEY, TRUNCATED_KEY, COLUMNS_KEY = (
    "uid",
    "grpo_web/advantage",
    "grpo_web/length",
    "grpo_web/truncated",
    "grpo_web/columns",
)
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


def _number(value):
    if value is None or isinstance(value, bool):
        return value
    value = float(value)
    return value if math.isfinite(value) else None


def rollouts_event(dump: str | Path, reward_names: list[str], num_generations: int) -> dict:
    """One of verl's ``{step}.jsonl`` rollout dumps as a "rollouts" event: rows in verl's order, grouped by verl's
    uid (the prompt's group), verl's score as the reward and its GRPO advantage."""
    lines = [json.loads(line) for line in Path(dump).read_text().splitlines() if line.strip()]
    groups: dict[str, int] = {}
    rows = []
    for index, line in enumerate(lines):
        group = groups.setdefault(str(line.get(GROUP_KEY, index // num_generations)), len(groups))
        columns = line.get(COLUMNS_KEY)
        rows.append(
            {
                "index": index,
                "group": group,
                "prompt": line["input"],
                "completion": line["output"],
                "rewards": [_number(line.get(f"rewards/{name}")) for name in reward_names],
                "reward": _number(line["score"]),
                "advantage": _number(line.get(ADVANTAGE_KEY)),
                "length": int(line.get(LENGTH_KEY) or 0),
                "truncated": bool(line.get(TRUNCATED_KEY)),
                "columns": json.loads(columns) if isinstance(columns, str) else {},
            }
        )
    step = int(lines[0]["step"]) if lines else int(Path(dump).stem)
    return {
        "type": "rollouts",
        "step": step,
        "num_generations": num_generations,
        "reward_names": reward_names,
        "rows": rows,
    }


def metrics_event(line: dict, max_steps: int) -> dict:
    """A line of verl's file logger ({"step", "data"}) as a "metrics" event, TRL's names beside verl's."""
    data = {k: _number(v) if isinstance(v, (int, float)) else v for k, v in line["data"].items()}
    data |= {alias: data[name] for name, alias in METRIC_ALIASES.items() if name in data and alias not in data}
    return {"type": "metrics", "step": int(line["step"]), "max_steps": max_steps, "metrics": data}


def reward_means(event: dict) -> dict:
    """rewards/<name>/mean per step from a rollouts event (TRL logs them; verl's metrics do not have them)."""
    out = {}
    for k, name in enumerate(event["reward_names"]):
        values = [r["rewards"][k] for r in event["rows"] if r["rewards"][k] is not None]
        if values:
            out[f"rewards/{name}/mean"] = sum(values) / len(values)
    return out
