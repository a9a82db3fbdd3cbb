"""What counts as solving a prompt: one reward function's score, or the weighted total, at least a threshold. Used by
the rollout inspection pages (prompt history, health) and by the comparison of runs."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import FloatField, Q
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.db.models.lookups import GreaterThanOrEqual

from runs.models import Run


class CriterionError(ValueError):
    """A solve criterion that names no reward the runs share."""


TOTAL = "reward"  # solve on the weighted total reward rather than one function's


@dataclass(frozen=True)
class Criterion:
    """When a completion solves its prompt: its score (one reward function's, or the weighted total) is at least
    the threshold. A run's solve rate on a prompt is the share of its completions of that prompt that solve it."""

    solved_by: str
    threshold: float

    def describe(self) -> str:
        score = "total (weighted) reward" if self.solved_by == TOTAL else f"{self.solved_by} reward"
        return f"A completion solves its prompt when its {score} is at least {self.threshold:g}."

    def as_dict(self) -> dict:
        return {"solved_by": self.solved_by, "threshold": self.threshold, "text": self.describe()}

    def q(self, run: Run) -> Q:
        if self.solved_by == TOTAL:
            return Q(reward__gte=self.threshold)
        # rewards are stored in the run's order of functions; read as a number, an abstention (null) is NULL and
        # never solves (compared as JSON, SQLite would put the text 'null' above every number)
        score = Cast(KeyTextTransform(str(run.reward_names.index(self.solved_by)), "rewards"), FloatField())
        return Q(GreaterThanOrEqual(score, self.threshold))

    def solves(self, completion: dict) -> bool:
        """For a completion as selectors.step_groups gives it."""
        score = completion["reward"] if self.solved_by == TOTAL else completion["rewards"].get(self.solved_by)
        return score is not None and score >= self.threshold


def solve_choices(runs: list[Run]) -> list[str]:
    """The scores every run has: the total, and each reward function all of them use."""
    shared = [name for name in runs[0].reward_names if all(name in run.reward_names for run in runs[1:])]
    return [TOTAL, *shared]


def criterion_for(runs: list[Run], solved_by: str = "", threshold: float = 1.0) -> Criterion:
    """By default a run's `accuracy` reward decides when every run has one, else the total reward."""
    choices = solve_choices(runs)
    if not solved_by:
        solved_by = "accuracy" if "accuracy" in choices else TOTAL
    if solved_by not in choices:
        raise CriterionError(f"solved_by: give one of {', '.join(choices)} (a reward every compared run has)")
    return Criterion(solved_by=solved_by, threshold=threshold)
