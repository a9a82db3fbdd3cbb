"""A token shard as the training program writes it (grpo_web_attach.tokens.write_shard, its own schema), with made-up
values: what the token-level view's pages read. That the values in real shards are TRL's own is
tests/workers/test_token_capture.py's job."""

from __future__ import annotations

import math

from grpo_web_attach.tokens import write_shard

# group 0's four completions at step 1: tokens, log-probabilities at generation, ratios, clipped low/high per token
TOKENS = [
    (
        ["4", " is", " it", "<script>window.pwned=1</script>"],
        [-0.1, -2.5, -0.7, -4.0],
        [1.0, 1.3, 0.95, 0.7],
        [False, False, False, True],
        [False, True, False, False],
    ),
    (["5"], [-3.0], [1.0], [False], [False]),
    (["4", "."], [-0.2, -1.0], [1.5, 1.1], [False, False], [True, False]),
    (["2", "2"], [-1.5, -1.6], [0.9, 1.0], [False, False], [False, False]),
]


def shard_rows(step: int = 1, group: int = 0, G: int = 4) -> list[dict]:
    rows = []
    for k, (tokens, logps, ratios, low, high) in enumerate(TOKENS):
        n = len(tokens)
        rows.append(
            {
                "step": step,
                "update_step": step,
                "index": group * G + k,
                "group": group,
                "completion": k,
                "token_ids": list(range(10, 10 + n)),
                "tokens": tokens,
                "mask": [True] * n,
                "logprob": [v - 0.01 for v in logps],
                "old_logprob": logps,
                "sampling_logprob": None,
                "ref_logprob": [v - 0.5 for v in logps],
                "entropy": [abs(v) / 2 for v in logps],
                "ratio": ratios,
                "clipped_low": low,
                "clipped_high": high,
                "clipped": [a or b for a, b in zip(low, high)],
            }
        )
    return rows


def write_step_shard(run, step: int = 1, group: int = 0) -> None:
    write_shard(run.run_dir / "tokens", step, shard_rows(step, group))


def prob(logp: float) -> float:
    return math.exp(logp)
