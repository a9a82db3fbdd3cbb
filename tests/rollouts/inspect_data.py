"""Runs whose rollouts and metrics come in through the real ingest path (runs.rollouts.ingest.ingest_events), for the
inspection tests: every derived column (prompt key, zero variance, reflection tags) is the ingest's own.

The advantages here are made up by the textbook definition (statistics.stdev, independent of runs.rollouts.groups):
they make plausible pages, nothing more. Whether stored advantages and the page's formula are TRL's own is checked
against real TRL runs in tests/workers/test_fidelity.py."""

from __future__ import annotations

import statistics

from runs.models import Run
from runs.rollouts.ingest import ingest_events

CONFIG = {
    "num_generations": 4,
    "max_completion_length": 16,
    "learning_rate": 0.01,
    "beta": 0.0,
    "max_steps": 10,
    "per_device_train_batch_size": 8,
    "seed": 42,
    "loss_type": "dapo",
    "scale_rewards": "group",
}
REWARDS = ("accuracy", "digit_ratio")


def make_run(owner, dataset_version, name="inspected", *, rewards=REWARDS, config=None, **fields) -> Run:
    config = {**CONFIG, **(config or {})}
    return Run.objects.create(
        owner=owner,
        name=name,
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": n, "weight": 1.0, "version_id": None, "builtin": n} for n in rewards],
        config=config,
        total_steps=config["max_steps"],
        status=fields.pop("status", Run.Status.COMPLETED),
        **fields,
    )


def group_rows(
    prompt: str,
    completions: list[tuple[str, list[float | None]]],
    *,
    start: int,
    group: int,
    scale_rewards: str = "group",
    lengths=None,
    truncated=None,
) -> list[dict]:
    """Rows of one group as workers.training.capture writes them: weighted total, TRL's advantage for ``scale_rewards``
    (batch scaling is applied by ``rollouts_event``)."""
    totals = [
        None if all(s is None for s in scores) else sum(s for s in scores if s is not None) for _, scores in completions
    ]
    scored = [t for t in totals if t is not None]
    mean = statistics.fmean(scored) if scored else None
    std = statistics.stdev(scored) if len(scored) > 1 else None
    rows = []
    for i, ((text, scores), total) in enumerate(zip(completions, totals)):
        if total is None or mean is None:
            adv = 0.0
        elif scale_rewards == "none":
            adv = total - mean
        else:
            adv = (total - mean) / (std + 1e-4) if std is not None else 0.0
        rows.append(
            {
                "index": start + i,
                "group": group,
                "prompt": prompt,
                "completion": text,
                "rewards": scores,
                "reward": total,
                "advantage": adv,
                "length": lengths[i] if lengths else 10 + i,
                "truncated": bool(truncated[i]) if truncated else False,
                "columns": {"answer": "4"},
            }
        )
    return rows


def rollouts_event(
    step: int, groups: list[tuple[str, list[tuple[str, list[float | None]]]]], *, scale_rewards: str = "group", **kwargs
) -> dict:
    rows, start = [], 0
    for g, (prompt, completions) in enumerate(groups):
        rows += group_rows(prompt, completions, start=start, group=g, scale_rewards=scale_rewards, **kwargs)
        start += len(completions)
    if scale_rewards == "batch":
        batch_std = statistics.stdev([r["reward"] for r in rows if r["reward"] is not None])
        for g in range(len(groups)):
            members = [r for r in rows if r["group"] == g]
            mean = statistics.fmean([r["reward"] for r in members if r["reward"] is not None])
            for r in members:
                r["advantage"] = (r["reward"] - mean) / (batch_std + 1e-4) if r["reward"] is not None else 0.0
    G = len(groups[0][1]) if groups else 0
    return {
        "type": "rollouts",
        "ts": 1.0,
        "step": step,
        "num_generations": G,
        "reward_names": list(REWARDS),
        "rows": rows,
    }


def metrics_event(step: int, **metrics) -> dict:
    return {"type": "metrics", "ts": 1000.0 + step, "step": step, "metrics": metrics}


def ingest(run: Run, *events: dict) -> dict:
    return ingest_events(run, list(events))


def eval_event(
    step: int | None,
    prompts: list[tuple[str, list[tuple[str, float]]]],
    *,
    threshold: float = 1.0,
    kind: str = "periodic",
) -> dict:
    """An "eval" event as workers.training.evaluate writes it: per prompt, its completions as (text, accuracy); the last one is
    the greedy completion. Correctness, the extracted answer and the figures are the program's own functions."""
    from workers.training.evaluate import extract_answer, metrics

    rows = []
    for p, (prompt, completions) in enumerate(prompts):
        k = len(completions) - 1
        for s, (text, accuracy) in enumerate(completions):
            rows.append(
                {
                    "prompt_index": p,
                    "sample": s,
                    "greedy": s == k,
                    "prompt": prompt,
                    "completion": text,
                    "rewards": [accuracy, 0.5],
                    "reward": accuracy + 0.5,
                    "correct": accuracy >= threshold,
                    "answer": extract_answer(text),
                    "length": 8,
                    "truncated": False,
                    "columns": {"answer": "4"},
                }
            )
    k = len(prompts[0][1]) - 1 if prompts else 0
    return {
        "type": "eval",
        "ts": 2000.0,
        "step": step,
        "kind": kind,
        "label": f"step {step}",
        "source": "arithmetic",
        "k": k,
        "solved_by": "accuracy",
        "threshold": threshold,
        "prompts": len(prompts),
        "samples": len(rows),
        "metrics": metrics(rows, k),
        "generation_seconds": 0.5,
        "seconds": 0.6,
        "rows": rows,
    }
