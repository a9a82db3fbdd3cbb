"""Runs with metrics and rollouts written straight to the database, for the comparison tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from runs.models import Rollout, Run, StepMetric

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)
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


def make_run(
    owner,
    dataset_version,
    name,
    *,
    rewards=("accuracy", "digit_ratio"),
    config=None,
    status=Run.Status.COMPLETED,
    started_at=T0,
    **fields,
) -> Run:
    config = {**CONFIG, **(config or {})}
    return Run.objects.create(
        owner=owner,
        name=name,
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": n, "weight": 1.0, "version_id": None, "builtin": n} for n in rewards],
        config=config,
        status=status,
        started_at=started_at,
        total_steps=config["max_steps"],
        **fields,
    )


def log_metrics(run: Run, series: dict[str, list], *, first: float = 5.0, every: float = 10.0) -> None:
    """Steps 1, 2, ... with ``series[name][step - 1]``, logged ``first`` seconds after the start, then every ``every``."""
    steps = max(len(v) for v in series.values())
    for i in range(steps):
        StepMetric.objects.create(
            run=run,
            step=i + 1,
            logged_at=run.started_at + timedelta(seconds=first + i * every),
            metrics={k: v[i] for k, v in series.items() if i < len(v)},
        )
    run.step = steps
    run.save(update_fields=["step"])


def add_group(
    run: Run, step: int, prompt: str, scores: list[list[float | None]], *, completions=None, reflections=None
) -> list[Rollout]:
    """One group of ``prompt`` at ``step``: completion i has the per-function rewards ``scores[i]`` (in the run's
    order), their weighted total, and TRL's group-scaled advantage."""
    weights = [r["weight"] for r in run.rewards]
    totals = [sum(w * s for w, s in zip(weights, row) if s is not None) for row in scores]
    mean = sum(totals) / len(totals)
    std = (sum((t - mean) ** 2 for t in totals) / (len(totals) - 1)) ** 0.5
    start = Rollout.objects.filter(run=run, step=step).count()
    group = start // len(scores)
    return Rollout.objects.bulk_create(
        [
            Rollout(
                run=run,
                step=step,
                index=start + i,
                group=group,
                prompt=prompt,
                completion=completions[i] if completions else f"completion {i} of {prompt}",
                rewards=row,
                reward=totals[i],
                advantage=(totals[i] - mean) / (std + 1e-4),
                length=5 + i,
                reflections=reflections[i] if reflections else [],
            )
            for i, row in enumerate(scores)
        ]
    )
