"""A group's reward statistics as TRL computes them (GRPOTrainer._generate_and_score_completions, sum_then_normalize):
mean and unbiased std over the completions that have a reward (None, every function abstaining, is left out), and
the advantage they produce. No Django here."""

from __future__ import annotations

import math
from dataclasses import dataclass

EPSILON = 1e-4  # TRL: advantages / (std + 1e-4)
ZERO_STD_ATOL = 1e-8  # TRL flags torch.isclose(std, 0): |std| <= 1e-8


@dataclass(frozen=True)
class GroupStats:
    mean: float | None
    std: float | None  # None below two rewards, as TRL's nanstd (NaN)
    zero_std: bool  # no learning signal: every completion got the same reward


def group_stats(values: list[float]) -> GroupStats:
    if not values:
        return GroupStats(None, None, False)
    mean = sum(values) / len(values)
    if len(values) < 2:
        return GroupStats(mean, None, False)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))  # torch.std: unbiased
    return GroupStats(mean, std, std <= ZERO_STD_ATOL)


def eps_text(epsilon: float) -> str:
    """1e-4, not 0.0001 nor 1e-04."""
    mantissa, exponent = f"{epsilon:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def formula(scale_rewards: str | None, aggregation: str | None = None, epsilon: float = EPSILON) -> str:
    """How rewards became advantages under ``scale_rewards`` and ``multi_objective_aggregation``; ``epsilon``: what
    the std is padded with (TRL's 1e-4; verl's GRPO estimator's 1e-6)."""
    e = eps_text(epsilon)
    if aggregation == "normalize_then_sum":
        return (
            f"each function's score normalised in its group, (score − group mean) / (group std + {e}), then "
            f"weighted and summed; advantage = (sum − step mean) / (step std + {e})"
        )
    if scale_rewards == "none":
        return "advantage = reward − group mean"
    if scale_rewards == "batch":
        return f"advantage = (reward − group mean) / (std of the step's batch + {e})"
    return f"advantage = (reward − group mean) / (group std + {e})"


def advantage(
    reward: float | None, mean: float | None, scale: float | None, scale_rewards: str | None, epsilon: float = EPSILON
) -> float:
    """The advantage the formula gives, to show beside the trainer's (they agree up to float32 rounding)."""
    if reward is None or mean is None:
        return 0.0  # unscorable: TRL zeroes its advantage
    if scale_rewards == "none":
        return reward - mean
    if scale is None:
        return 0.0  # one reward in the group: TRL's std is NaN, and so the advantage, zeroed
    return (reward - mean) / (scale + epsilon)


def normalize_then_sum(rows: list[tuple[int, list[float | None]]], weights: list[float]) -> list[float]:
    """TRL's advantages under multi_objective_aggregation="normalize_then_sum", for one step's rows (group, scores
    per function): each function normalised within its group, weighted and summed, then the sum normalised over the
    whole step. A row every function abstained on, or one whose sum is undefined, gets 0, as TRL's NaN -> 0."""
    by_group: dict[int, list[list[float | None]]] = {}
    for group, scores in rows:
        by_group.setdefault(group, []).append(scores)
    stats = {
        group: [group_stats([s[k] for s in members if s[k] is not None]) for k in range(len(weights))]
        for group, members in by_group.items()
    }
    sums: list[float | None] = []
    for group, scores in rows:
        if all(s is None for s in scores):
            sums.append(None)
            continue
        total = 0.0  # torch's nansum: a function without a normalised score (None, or a group std of NaN) adds 0
        for k, (s, w) in enumerate(zip(scores, weights)):
            st = stats[group][k]
            if s is not None and st.std is not None:
                total += w * (s - st.mean) / (st.std + EPSILON)
        sums.append(total)
    step = group_stats([v for v in sums if v is not None])
    if step.std is None:  # fewer than two sums: TRL's std is NaN, so is every advantage, zeroed
        return [0.0] * len(sums)
    return [0.0 if v is None else (v - step.mean) / (step.std + EPSILON) for v in sums]
