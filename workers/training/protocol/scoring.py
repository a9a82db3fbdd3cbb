"""When an evaluated completion counts as correct, and the majority vote over answers: shared by the evaluation
program (workers.training.evaluate) and the pages that show its results. No Django here."""

from __future__ import annotations

from collections import Counter

TOTAL = "reward"  # eval_solved_by naming the weighted total rather than one function


def criterion(solved_by: str, reward_names: list[str]) -> str:
    """The reward that decides correctness: the one named, else ``accuracy`` when the run has it, else the total."""
    if solved_by:
        if solved_by != TOTAL and solved_by not in reward_names:
            raise ValueError(
                f"eval_solved_by: '{solved_by}' is not one of the run's rewards "
                f"({', '.join(reward_names)}) nor '{TOTAL}' (the weighted total)"
            )
        return solved_by
    return "accuracy" if "accuracy" in reward_names else TOTAL


def majority(answers: list[str | None]) -> int | None:
    """Index of the first sample holding the most frequent answer (ties: the answer seen first); None if no sample
    has an answer."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    top = max(counts.values())
    return next(i for i, a in enumerate(answers) if a is not None and counts[a] == top)
