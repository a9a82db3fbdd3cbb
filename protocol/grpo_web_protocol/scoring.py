"""When an evaluated completion counts as correct, the majority vote over answers, and an evaluation's figures from
its scored completions: shared by the evaluation program (workers.training.evaluate), the importer of verl's
validation dumps (runs.attach.importers.verl) and the pages that show their results. No Django, no torch here."""

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


def metrics(rows: list[dict], k: int) -> dict:
    """The evaluation's figures from its rows (``prompt_index``, ``greedy``, ``correct``, ``answer``, ``reward``)."""
    by_prompt: dict[int, dict] = {}
    for row in rows:
        entry = by_prompt.setdefault(row["prompt_index"], {"samples": [], "greedy": None})
        if row["greedy"]:
            entry["greedy"] = row
        else:
            entry["samples"].append(row)
    n = len(by_prompt) or 1
    mean_k = pass_k = maj_k = greedy = 0.0
    rewards, greedy_rewards, answered = [], [], 0
    for entry in by_prompt.values():
        samples = entry["samples"]
        correct = [s["correct"] for s in samples]
        mean_k += sum(correct) / max(1, len(samples))
        pass_k += any(correct)
        vote = majority([s["answer"] for s in samples])
        maj_k += vote is not None and samples[vote]["correct"]
        greedy += bool(entry["greedy"] and entry["greedy"]["correct"])
        rewards += [s["reward"] for s in samples if s["reward"] is not None]
        answered += sum(s["answer"] is not None for s in samples)
        if entry["greedy"] and entry["greedy"]["reward"] is not None:
            greedy_rewards.append(entry["greedy"]["reward"])
    total_samples = sum(len(e["samples"]) for e in by_prompt.values()) or 1
    return {
        "mean@k": mean_k / n,
        "pass@k": pass_k / n,
        "maj@k": maj_k / n,
        "greedy": greedy / n,
        "reward_mean@k": sum(rewards) / len(rewards) if rewards else None,
        "reward_greedy": sum(greedy_rewards) / len(greedy_rewards) if greedy_rewards else None,
        "answer_rate": answered / total_samples,
    }
