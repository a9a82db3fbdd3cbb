"""Reads of the token-level view: the per-step Parquet shards beside the run (``<run_dir>/tokens/step-NNNNNN.parquet``,
grpo_web_attach.tokens), written there by the training program or, for an attached run, stored from its client's
uploads (runs.attach.shards), each row one completion of a sampled group as the update of that optimizer step saw it,
joined to its rollout by (step, index). The values are TRL's; nothing is recomputed
here beyond picking which tokens to list (most clipped, least probable)."""

from __future__ import annotations

import math
from pathlib import Path

from runs.models import Run

# what the page can colour tokens by, in its select's order: (column, label)
FIELDS = [
    ("logprob", "log-probability at the update"),
    ("old_logprob", "log-probability at generation"),
    ("sampling_logprob", "log-probability of the sampler (vLLM)"),
    ("ref_logprob", "reference log-probability"),
    ("entropy", "entropy"),
    ("ratio", "importance ratio"),
    ("clipped", "clipped"),
]
COLUMNS = [
    "step",
    "update_step",
    "index",
    "group",
    "completion",
    "token_ids",
    "tokens",
    "mask",
    "logprob",
    "old_logprob",
    "sampling_logprob",
    "ref_logprob",
    "entropy",
    "ratio",
    "clipped_low",
    "clipped_high",
    "clipped",
]
LISTED = 5  # tokens listed per completion as most clipped, and as least probable


def shard_path(run: Run, step: int) -> Path:
    return run.run_dir / "tokens" / f"step-{int(step):06d}.parquet"


def _read(run: Run, step: int, columns: list[str], group: int | None = None) -> list[dict]:
    import pyarrow.parquet as pq

    path = shard_path(run, step)
    if not path.is_file():
        return []
    try:
        table = pq.read_table(path, columns=columns, filters=[("group", "=", group)] if group is not None else None)
    except (OSError, ValueError, KeyError):  # not a shard of ours (or a column missing): nothing to show
        return []
    return table.to_pylist()


def token_groups(run: Run, step: int) -> list[int]:
    """The groups whose tokens optimizer step ``step`` kept."""
    return sorted({r["group"] for r in _read(run, step, ["group"])})


def _finite(v):
    return v if v is not None and math.isfinite(v) else None


def _listed(row: dict) -> tuple[list[dict], list[dict]]:
    """The completion's most clipped tokens (clipped, the ratio farthest from 1 first) and its least probable ones
    (lowest log-probability at generation)."""
    tokens, ratio, clipped = row["tokens"], row["ratio"] or [], row["clipped"] or []
    logps = row["old_logprob"] or row["logprob"] or []
    most_clipped = sorted(
        (i for i, c in enumerate(clipped) if c and ratio[i] is not None), key=lambda i: -abs(ratio[i] - 1.0)
    )[:LISTED]
    least = sorted((i for i, v in enumerate(logps) if _finite(v) is not None), key=lambda i: logps[i])[:LISTED]
    low = row["clipped_low"] or [False] * len(tokens)
    return (
        [
            {"position": i, "text": tokens[i], "ratio": ratio[i], "side": "low" if low[i] else "high"}
            for i in most_clipped
        ],
        [{"position": i, "text": tokens[i], "logprob": logps[i], "prob": math.exp(logps[i])} for i in least],
    )


def step_tokens(run: Run, step: int, group: int | None = None) -> dict:
    """The completions whose tokens optimizer step ``step`` kept (of one group, or all), each with its per-token
    values (None where TRL had none: the reference without beta, the sampler without vLLM), its most clipped and its
    least probable tokens."""
    rows = _read(run, step, COLUMNS, group)
    completions = []
    for row in sorted(rows, key=lambda r: r["index"]):
        most_clipped, least_probable = _listed(row)
        completions.append(
            {
                "step": row["step"],
                "update_step": row["update_step"],
                "index": row["index"],
                "group": row["group"],
                "completion": row["completion"],
                "tokens": row["tokens"],
                "mask": row["mask"],
                "values": {
                    name: [_finite(v) for v in row[name]] if row[name] is not None else None
                    for name in ("logprob", "old_logprob", "sampling_logprob", "ref_logprob", "entropy", "ratio")
                },
                "clipped": row["clipped"],
                "clipped_low": row["clipped_low"],
                "clipped_high": row["clipped_high"],
                "most_clipped": most_clipped,
                "least_probable": least_probable,
            }
        )
    present = {name for c in completions for name, v in c["values"].items() if v is not None}
    fields = [
        {"name": name, "label": label}
        for name, label in FIELDS
        if name in present or (name == "clipped" and any(c["clipped"] is not None for c in completions))
    ]
    return {"step": step, "group": group, "fields": fields, "completions": completions}
