"""Reward replay arithmetic: one step's stored completions re-scored by other reward versions or weights, turned into
rewards and advantages the way TRL's GRPOTrainer does (``_generate_and_score_completions``: weighted sum, NaN for a
completion every function abstained on, group mean and unbiased std, ``scale_rewards`` group/batch/none, and the
``multi_objective_aggregation`` sum_then_normalize or normalize_then_sum), then compared with what was stored: rank
changes within each group, whether the group's best completion changed, the share of zero-variance groups.

TRL computes advantages inline (no function to call) and in float32; these are float64, so they agree with TRL's to
float32 rounding (about 1e-6 relative), which ``tests/rollouts/test_replay.py`` checks against a run TRL itself scored
with the new weights. A step whose rewards come back unchanged keeps TRL's own stored advantages, exactly.
No Django here: the replay task and the benchmark use it as is.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

EPSILON = 1e-4  # TRL: / (std + 1e-4)
ZERO_STD_ATOL = 1e-8  # TRL: torch.isclose(std, 0)


def float32(value: float | None) -> float | None:
    """``value`` as TRL holds it: reward functions' outputs and the weights go into float32 tensors, and the stored
    rows carry those values."""
    return None if value is None else struct.unpack("f", struct.pack("f", value))[0]


def _nanmean(values: list[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def _nanstd(values: list[float | None]) -> float | None:
    """TRL's nanstd: unbiased over the values present; None (NaN) below two."""
    xs = [v for v in values if v is not None]
    if len(xs) < 2:
        return None
    mean = sum(xs) / len(xs)
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def total(rewards: list[float | None], weights: list[float]) -> float | None:
    """The weighted sum TRL forms (nansum); None when every function abstained."""
    present = [(r, w) for r, w in zip(rewards, weights) if r is not None]
    return sum(r * w for r, w in present) if present else None


def advantages(
    per_row: list[list[float | None]],
    weights: list[float],
    G: int,
    scale_rewards: str = "group",
    aggregation: str = "sum_then_normalize",
) -> tuple[list[float], list[bool]]:
    """TRL's advantages for one generation batch (rows in batch order, ``G`` per group), and per group whether its
    std was zero (TRL's ``frac_reward_zero_std``)."""
    n = len(per_row)
    groups = [list(range(g, min(g + G, n))) for g in range(0, n, G)]
    if aggregation == "normalize_then_sum":
        k = len(weights)
        normalized: list[list[float | None]] = [[None] * k for _ in range(n)]
        for members in groups:
            for j in range(k):
                column = [per_row[i][j] for i in members]
                mean, std = _nanmean(column), _nanstd(column) if G > 1 else 0.0
                for i in members:
                    r = per_row[i][j]
                    normalized[i][j] = (
                        None if r is None or mean is None or std is None else (r - mean) / (std + EPSILON)
                    )
        rewards = [
            None
            if all(r is None for r in per_row[i])
            else sum(v * w for v, w in zip(normalized[i], weights) if v is not None)
            for i in range(n)
        ]
        mean, std = _nanmean(rewards), _nanstd(rewards) if n > 1 else 0.0
        adv = [0.0 if r is None or mean is None or std is None else (r - mean) / (std + EPSILON) for r in rewards]
        zero = std is not None and abs(std) <= ZERO_STD_ATOL
        return adv, [zero] * len(groups)
    if aggregation != "sum_then_normalize":
        raise ValueError(f"unknown multi_objective_aggregation {aggregation!r}")
    rewards = [total(r, weights) for r in per_row]
    batch_std = _nanstd(rewards) if n > 1 else 0.0
    adv, zero = [0.0] * n, []
    for members in groups:
        values = [rewards[i] for i in members]
        mean = _nanmean(values)
        std = (_nanstd(values) if G > 1 else 0.0) if scale_rewards in ("group", "none") else batch_std
        if scale_rewards not in ("group", "none", "batch"):
            raise ValueError(f"unknown scale_rewards {scale_rewards!r}")
        zero.append(std is not None and abs(std) <= ZERO_STD_ATOL)
        for i in members:
            r = rewards[i]
            if r is None or mean is None:
                continue  # unscorable: NaN, zeroed
            if scale_rewards == "none":
                adv[i] = r - mean
            elif std is not None:
                adv[i] = (r - mean) / (std + EPSILON)
    return adv, zero


def ranks(values: list[float | None]) -> list[int]:
    """1 for the highest reward in the group; ties share the better rank; an unscorable completion ranks last."""
    present = sorted((v for v in values if v is not None), reverse=True)
    return [present.index(v) + 1 if v is not None else len(values) for v in values]


@dataclass
class StepReplay:
    rows: list[dict]  # per completion: index, group, old/new reward, old/new advantage, old/new rank, new_rewards
    groups: list[dict]  # per group: rank changes, best_changed
    zero_std_before: float
    zero_std_after: float


def replay_step(
    rows: list[dict],
    new_rewards: list[list[float | None]],
    weights: list[float],
    G: int,
    *,
    scale_rewards: str = "group",
    aggregation: str = "sum_then_normalize",
) -> StepReplay:
    """``rows``: one step's stored rollouts in batch order (index, group, rewards, reward, advantage, zero_std);
    ``new_rewards``: each one's per-function rewards from the replayed functions, ``weights`` theirs (both rounded
    to float32 here, as TRL rounds them)."""
    new_rewards = [[float32(v) for v in row] for row in new_rewards]
    weights = [float32(w) for w in weights]
    new_totals = [total(n, weights) for n in new_rewards]
    same = all(r["rewards"] == new and r["reward"] == t for r, new, t in zip(rows, new_rewards, new_totals))
    if same:
        adv = [r["advantage"] for r in rows]  # the rewards did not change: TRL's own advantages stand
        _, zero = advantages(new_rewards, weights, G, scale_rewards, aggregation)
    else:
        adv, zero = advantages(new_rewards, weights, G, scale_rewards, aggregation)
    out, groups = [], []
    by_group: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        by_group.setdefault(r["group"], []).append(i)
    old_zero = []
    for g, members in by_group.items():
        old = ranks([rows[i]["reward"] for i in members])
        new = ranks([new_totals[i] for i in members])
        old_zero.append(bool(rows[members[0]]["zero_std"]))
        for i, o, n in zip(members, old, new):
            out.append(
                {
                    "rollout_id": rows[i].get("id"),
                    "index": rows[i]["index"],
                    "group": g,
                    "old_rewards": rows[i]["rewards"],
                    "new_rewards": new_rewards[i],
                    "old_reward": rows[i]["reward"],
                    "new_reward": new_totals[i],
                    "old_advantage": rows[i]["advantage"],
                    "new_advantage": adv[i],
                    "old_rank": o,
                    "new_rank": n,
                }
            )
        best_old = {members[j] for j, o in enumerate(old) if o == 1 and rows[members[j]]["reward"] is not None}
        best_new = {members[j] for j, n in enumerate(new) if n == 1 and new_totals[members[j]] is not None}
        groups.append(
            {"group": g, "rank_changes": sum(o != n for o, n in zip(old, new)), "best_changed": best_old != best_new}
        )
    return StepReplay(
        rows=out,
        groups=groups,
        zero_std_before=sum(old_zero) / len(old_zero) if old_zero else 0.0,
        zero_std_after=sum(zero) / len(zero) if zero else 0.0,
    )
