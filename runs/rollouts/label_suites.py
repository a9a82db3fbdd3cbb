"""A reward function's label suite read from the runs (rewards.label_suite holds its form): the labeled rollouts it
tests, the groups they are judged within, and the agreement of a set of scores with it: those a sandbox check gave
(workers.reward_checks), or those a reward replay gave (for an edited version, before anyone trains with it)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django.urls import reverse

from rewards.label_suite import MAX_CASES, describe, mean, met
from runs.models import Label, Replay, ReplayRow, Rollout, Run


@dataclass
class Case:
    run_id: int
    rollout_id: int
    step: int
    group: int
    label: str
    expectation: dict


def suite_cases(suite: dict, user) -> tuple[list[Case], list[str]]:
    """The suite's cases (each labeled rollout of its runs that ``user`` may see, once per label name it carries),
    at most MAX_CASES, and notes on what was left out."""
    notes = []
    by_label = {e["label"]: e for e in suite.get("expectations", [])}
    runs = list(Run.objects.visible_to(user).filter(pk__in=suite.get("runs", [])).values_list("pk", flat=True))
    missing = sorted(set(suite.get("runs", [])) - set(runs))
    if missing:
        notes.append(f"runs {', '.join(map(str, missing))}: not found (or not yours to see); left out")
    labels = (
        Label.objects.filter(run_id__in=runs, name__in=by_label, rollout_id__isnull=False)
        .order_by("run_id", "step", "rollout_id", "name")
        .values_list("run_id", "rollout_id", "step", "group", "name")
        .distinct()
    )
    cases = [
        Case(run, rid, step, group, name, by_label[name]) for run, rid, step, group, name in labels[: MAX_CASES + 1]
    ]
    if len(cases) > MAX_CASES:
        notes.append(f"more than {MAX_CASES} labeled rollouts: the first {MAX_CASES} are checked")
        cases = cases[:MAX_CASES]
    return cases, notes


def case_groups(cases: list[Case]) -> dict[int, list[dict]]:
    """Per run, the stored rollouts of every group a case is in (the rows a check scores), in batch order."""
    wanted: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for c in cases:
        wanted[c.run_id][c.step].add(c.group)
    out: dict[int, list[dict]] = {}
    fields = ("id", "step", "group", "index", "prompt", "completion", "messages", "columns")
    for run_id, steps in wanted.items():
        rows: list[dict] = []
        for step, groups in sorted(steps.items()):
            rows += list(
                Rollout.objects.filter(run_id=run_id, step=step, group__in=groups).order_by("index").values(*fields)
            )
        out[run_id] = rows
    return out


def outcome(cases: list[Case], scores: dict[int, float | None], group_of: dict[int, tuple]) -> dict:
    """How far ``scores`` (by rollout id, for every rollout of the cases' groups) agree with the cases: each case with
    its score, its group's mean and whether it met its expectation; ``agrees`` of ``total``."""
    members: dict[tuple, list[float | None]] = defaultdict(list)
    for rid, key in group_of.items():
        members[key].append(scores.get(rid))
    rows = []
    for c in cases:
        key = (c.run_id, c.step, c.group)
        score, group_mean = scores.get(c.rollout_id), mean(members.get(key, []))
        rows.append(
            {
                "run": c.run_id,
                "rollout": c.rollout_id,
                "step": c.step,
                "group": c.group,
                "label": c.label,
                "expect": describe(c.expectation),
                "score": score,
                "group_mean": group_mean,
                "passed": met(c.expectation, score, group_mean),
                "link": reverse("rollout_link", args=[c.run_id, c.rollout_id]),
            }
        )
    return {"cases": rows, "agrees": sum(r["passed"] for r in rows), "total": len(rows)}


def replay_agreement(replay: Replay) -> list[dict]:
    """For each reward of the replay whose function has a label suite: how its stored values and the replay's new
    ones agree with the suite's cases in this run's replayed steps (for an edited version, before anyone trains with
    it)."""
    from rewards.models import RewardFunctionVersion  # rewards' models: a layer below runs

    run = replay.run
    out = []
    versions = RewardFunctionVersion.objects.select_related("function").in_bulk(
        [r["version_id"] for r in replay.rewards if r.get("version_id")]
    )
    for position, reward in enumerate(replay.rewards):
        version = versions.get(reward.get("version_id"))
        suite = version.function.label_suite if version else None
        if not suite:
            continue
        cases, _ = suite_cases({**suite, "runs": [run.pk]}, replay.owner)
        cases = [c for c in cases if c.step in set(replay.steps)]
        rows = ReplayRow.objects.filter(replay=replay).values(
            "rollout_id", "step", "group", "old_rewards", "new_rewards"
        )
        old, new, group_of = {}, {}, {}
        for r in rows:
            old[r["rollout_id"]] = (r["old_rewards"] or [None] * (position + 1))[position]
            new[r["rollout_id"]] = (r["new_rewards"] or [None] * (position + 1))[position]
            group_of[r["rollout_id"]] = (run.pk, r["step"], r["group"])
        stored, replayed = outcome(cases, old, group_of), outcome(cases, new, group_of)
        out.append(
            {
                "reward": reward["name"],
                "version": version.number,
                "stored": {"agrees": stored["agrees"], "total": stored["total"]},
                "replay": {"agrees": replayed["agrees"], "total": replayed["total"]},
                "cases": [
                    {**case, "stored_score": s["score"], "stored_passed": s["passed"]}
                    for case, s in zip(replayed["cases"], stored["cases"])
                ],
            }
        )
    return out
