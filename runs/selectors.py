"""Reads behind the run pages and their JSON endpoints."""

from __future__ import annotations

from django.db.models import Avg, Count, Max, Min

from runs.models import Rollout, Run

# TRL's metric names, in the order the run page draws them (each present key gets a chart).
CHART_METRICS = ["reward", "reward_std", "kl", "entropy", "completions/mean_length", "frac_reward_zero_std",
                 "completions/clipped_ratio", "loss", "grad_norm"]


def metric_series(run: Run) -> dict:
    """{"steps": [...], "series": {metric: [value or None per step]}} for every metric TRL logged."""
    rows = list(run.step_metrics.values_list("step", "metrics"))
    steps = [step for step, _ in rows]
    keys: dict[str, None] = {}
    for _, metrics in rows:
        for key, value in metrics.items():
            if isinstance(value, (int, float)) or value is None:
                keys.setdefault(key, None)
    series = {key: [metrics.get(key) for _, metrics in rows] for key in keys}
    reward_keys = [f"rewards/{name}/mean" for name in run.reward_names]
    charts = [k for k in CHART_METRICS[:2] if k in series] + [k for k in reward_keys if k in series] + \
             [k for k in CHART_METRICS[2:] if k in series]
    return {"steps": steps, "series": series, "charts": charts}


def rollout_steps(run: Run) -> list[int]:
    return list(run.rollouts.values_list("step", flat=True).distinct().order_by("step"))


def step_groups(run: Run, step: int) -> list[dict]:
    """The step's groups: prompt, then its G completions ranked by advantage, with group mean and std."""
    rollouts = list(Rollout.objects.filter(run=run, step=step).order_by("group", "-advantage", "index"))
    groups: dict[int, dict] = {}
    for r in rollouts:
        g = groups.setdefault(r.group, {"group": r.group, "prompt": r.prompt, "completions": []})
        g["completions"].append({
            "index": r.index, "completion": r.completion, "rewards": dict(zip(run.reward_names, r.rewards)),
            "reward": r.reward, "advantage": r.advantage, "length": r.length, "truncated": r.truncated,
            "reflections": r.reflections,
        })
    for g in groups.values():
        values = [c["reward"] for c in g["completions"] if c["reward"] is not None]
        mean = sum(values) / len(values) if values else None
        # TRL's std is the unbiased one (torch.std); shown beside the advantages it produced
        var = sum((v - mean) ** 2 for v in values) / (len(values) - 1) if len(values) > 1 else 0.0
        g.update(mean=mean, std=var ** 0.5, zero_std=var == 0.0)
    return list(groups.values())


def run_summary(run: Run) -> dict:
    agg = run.rollouts.aggregate(n=Count("id"), first=Min("step"), last=Max("step"), mean=Avg("reward"))
    reflective = run.rollouts.exclude(reflections=[]).count() if agg["n"] else 0
    return {"rollouts": agg["n"], "mean_reward": agg["mean"], "reflective": reflective}
