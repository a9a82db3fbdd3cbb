"""Writes of the rollouts capability: a run's reflection phrase list (and re-tagging its stored completions), its
detector thresholds, and rejection sampling of its completions into a new SFT dataset."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from grpo_web import queues
from rewards.services import RewardCodeError, check_source, normalize
from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import, datasets_dir
from runs.models import DatasetVersion, Replay, ReplayRow, Rollout, Run
from runs.rollouts.exports import write_sft_jsonl
from runs.rollouts.filters import filtered
from runs.rollouts.reflection import matcher, reflection_mask
from runs.rollouts.replay import replay_step
from runs.rollouts.selectors import reward_inputs


def run_detector_thresholds_update(*, run: Run, thresholds: dict) -> None:
    """Save the detector thresholds the run sets apart from the defaults (``detectors.ThresholdsForm``)."""
    run.detector_thresholds = thresholds
    run.save(update_fields=["detector_thresholds"])


RETAG_INLINE_ROWS = 20_000  # a run with more rollouts is re-tagged by a task on the default queue


def run_reflection_phrases_update(*, run: Run, phrases: list[str]) -> bool:
    """Save a run's edited phrase list (``runs.rollouts.reflection.clean_phrases`` first) and re-tag its stored rollouts:
    here for a small run, by a task for a large one. Returns True when the re-tagging was queued."""
    run.reflection_phrases = phrases
    run.save(update_fields=["reflection_phrases"])
    if Rollout.objects.filter(run=run)[: RETAG_INLINE_ROWS + 1].count() <= RETAG_INLINE_ROWS:
        rollout_reflections_retag(run_id=run.pk)
        return False
    transaction.on_commit(lambda: queues.enqueue(queues.RETAG_REFLECTIONS, args=[run.pk]))
    return True


def rollout_reflections_retag(*, run_id: int, chunk: int = 5000) -> int:
    """Match the run's current phrase list against its stored completions; update the rows whose tags changed.
    Returns how many changed."""
    run = Run.objects.get(pk=run_id)
    phrases = tuple(run.reflection_phrases)
    find = matcher(phrases).find
    changed, last = 0, 0
    while True:
        rows = list(
            Rollout.objects.filter(run=run, id__gt=last)
            .order_by("id")
            .only("id", "completion", "reflections", "reflection_mask")[:chunk]
        )
        if not rows:
            return changed
        last = rows[-1].id
        updates = []
        for r in rows:
            tags = find(r.completion)
            mask = reflection_mask(tags, phrases)  # bits move when phrases do
            if tags != r.reflections or mask != r.reflection_mask:
                r.reflections, r.reflective, r.reflection_mask = tags, bool(tags), mask
                updates.append(r)
        Rollout.objects.bulk_update(updates, ["reflections", "reflective", "reflection_mask"], batch_size=1000)
        changed += len(updates)


def dataset_from_rollouts(*, run: Run, data: dict, threshold: float, name: str = "") -> DatasetVersion:
    """Rejection sampling: the run's completions (with the browser's filters) whose total reward is at least
    ``threshold``, as a new dataset of the run's owner in TRL's prompt-completion SFT format (columns ``prompt`` and
    ``completion``; the prompt as the run stored it, as text). DatasetError when no completion qualifies."""
    with tempfile.TemporaryDirectory(dir=datasets_dir(), prefix=".sft-") as workdir:
        path = Path(workdir) / "sft.jsonl"
        if not write_sft_jsonl(run, data, threshold, path):
            raise DatasetError([f"no completion of this run has a reward of at least {threshold:g} with these filters"])
        return dataset_import(
            owner=run.owner,
            name=name or f"{run.name}: reward ≥ {threshold:g} (SFT)",
            path=path,
            source_name=f"run-{run.pk}-sft.jsonl",
        )


# --- reward replay -----------------------------------------------------------------------------------------------

REPLAY_MAX_ROWS = 500_000  # completions one replay may re-score


def replay_create(*, run: Run, owner, rewards: list[dict], filters: dict):
    """Queue a replay of the steps holding a rollout that passes the browser's ``filters`` (every completion of each
    step: TRL normalizes over groups, and over the whole batch under scale_rewards=batch), re-scored by ``rewards``
    (the run's list with other weights or versions). ValueError when nothing matches or it is too large."""
    steps = sorted(set(filtered(run, filters).order_by().values_list("step", flat=True).distinct()))
    if not steps:
        raise ValueError("no stored rollout passes these filters")
    total = Rollout.objects.filter(run=run, step__in=steps).aggregate(n=Count("id"))["n"]
    if total > REPLAY_MAX_ROWS:
        raise ValueError(f"these steps hold {total} completions; replay at most {REPLAY_MAX_ROWS} (narrow the steps)")
    replay = Replay.objects.create(
        run=run, owner=owner, rewards=rewards, filters=_plain_filters(filters), steps=steps, total=total
    )
    transaction.on_commit(lambda: queues.enqueue(queues.REWARD_REPLAY, args=[replay.pk]))
    return replay


def replay_reward_external(reward: dict, weight: float, source: str | None = None) -> dict:
    """The replay's entry for ``reward``, a reward of a run trained elsewhere (``external``): re-scored in the sandbox
    with ``source`` (the user's edit, when given) or the source the run came with. One whose source did not come with
    the run cannot be called again: the replay keeps its stored rewards (``stored``). ValueError names the reward."""
    name = reward["name"]
    edited = normalize(source) if source and source.strip() else None
    if not reward.get("source"):
        if edited is not None:
            raise ValueError(f"{name}: its source did not come with the run, so it cannot be replayed")
        return {"name": name, "weight": weight, "external": True, "stored": True}
    original = textwrap.dedent(normalize(reward["source"]))  # inspect.getsource keeps a nested function's indent
    code = textwrap.dedent(edited) if edited is not None else original
    try:
        check_source(code, name)
    except RewardCodeError as exc:
        raise ValueError(f"source of {name}: {exc}") from None
    entry = {"name": name, "weight": weight, "external": True, "source": code, "entrypoint": name}
    return {**entry, "edited": True} if code != original else entry


def _plain_filters(filters: dict) -> dict:
    return {k: v for k, v in filters.items() if v not in (None, "") and k not in ("sort", "after")}


def replay_execute(*, replay_id: int, score) -> None:
    """Run a queued replay: each step's stored rows re-scored by ``score(rows, specs) -> per-row lists of per-function
    rewards`` (the worker's, which runs user code in the sandbox), turned into TRL's rewards and advantages
    (runs.rollouts.replay), stored with the progress after each step; the summary at the end."""
    replay = Replay.objects.select_related("run").get(pk=replay_id)
    run = replay.run
    config = {**(run.config_extra or {}), **(run.config or {})}
    G = int(config.get("num_generations") or 8)
    scale = config.get("scale_rewards") or "group"
    scale = {True: "group", False: "none"}.get(scale, scale)  # TRL's old booleans
    aggregation = config.get("multi_objective_aggregation") or "sum_then_normalize"
    weights = [float(r.get("weight", 1.0)) for r in replay.rewards]
    Replay.objects.filter(pk=replay.pk).update(status=Replay.Status.RUNNING)
    steps_summary = []
    try:
        for step in replay.steps:
            rows = list(
                Rollout.objects.filter(run=run, step=step)
                .order_by("index")
                .values(
                    "id",
                    "index",
                    "group",
                    "prompt",
                    "completion",
                    "rewards",
                    "reward",
                    "advantage",
                    "zero_std",
                    "columns",
                    "messages",
                )
            )
            prompts, completions = reward_inputs(run, rows)  # as TRL passed them: messages for a conversational run
            new = score(
                [{**r, "prompt": p, "completion": c} for r, p, c in zip(rows, prompts, completions)], replay.rewards
            )
            result = replay_step(rows, new, weights, G, scale_rewards=scale, aggregation=aggregation)
            ReplayRow.objects.bulk_create(
                [ReplayRow(replay=replay, step=step, **r) for r in result.rows], batch_size=2000
            )
            steps_summary.append(
                {
                    "step": step,
                    "zero_std_before": result.zero_std_before,
                    "zero_std_after": result.zero_std_after,
                    "groups": len(result.groups),
                    "best_changed": sum(g["best_changed"] for g in result.groups),
                    "rank_changes": sum(g["rank_changes"] for g in result.groups),
                    "changed_best_groups": [g["group"] for g in result.groups if g["best_changed"]],
                }
            )
            Replay.objects.filter(pk=replay.pk).update(done=F("done") + len(rows))
    except Exception as exc:  # the user's code failing is reported on the replay's page, not lost in a worker log
        replay.mark_failed(f"{type(exc).__name__}: {exc}")
        raise
    Replay.objects.filter(pk=replay.pk).update(
        status=Replay.Status.COMPLETED, finished_at=timezone.now(), summary={"steps": steps_summary}
    )
