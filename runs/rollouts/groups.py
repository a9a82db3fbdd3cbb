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


def formula(scale_rewards: str | None) -> str:
    """How TRL turned rewards into advantages under ``scale_rewards``."""
    if scale_rewards == "none":
        return "advantage = reward − group mean"
    if scale_rewards == "batch":
        return "advantage = (reward − group mean) / (std of the step's batch + 1e-4)"
    return "advantage = (reward − group mean) / (group std + 1e-4)"


def advantage(reward: float | None, mean: float | None, scale: float | None, scale_rewards: str | None) -> float:
    """The advantage the formula gives, to show beside TRL's (they agree up to float32 rounding)."""
    if reward is None or mean is None:
        return 0.0  # unscorable: TRL zeroes its advantage
    if scale_rewards == "none":
        return reward - mean
    if scale is None:
        return 0.0  # one reward in the group: TRL's std is NaN, and so the advantage, zeroed
    return (reward - mean) / (scale + EPSILON)
