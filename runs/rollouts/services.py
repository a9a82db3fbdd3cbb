"""Writes of the rollouts capability: a run's reflection phrase list (and re-tagging its stored completions), its
detector thresholds, and rejection sampling of its completions into a new SFT dataset."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django.db import transaction

from grpo_web import queues
from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import, datasets_dir
from runs.models import DatasetVersion, Run

def run_detector_thresholds_update(*, run: Run, thresholds: dict) -> None:
    """Save the detector thresholds the run sets apart from the defaults (``detectors.ThresholdsForm``)."""
    run.detector_thresholds = thresholds
    run.save(update_fields=["detector_thresholds"])


RETAG_INLINE_ROWS = 20_000  # a run with more rollouts is re-tagged by a task on the default queue


def run_reflection_phrases_update(*, run: Run, phrases: list[str]) -> bool:
    """Save a run's edited phrase list (``runs.reflection.clean_phrases`` first) and re-tag its stored rollouts:
    here for a small run, by a task for a large one. Returns True when the re-tagging was queued."""
    from runs.models import Rollout

    run.reflection_phrases = phrases
    run.save(update_fields=["reflection_phrases"])
    if Rollout.objects.filter(run=run)[:RETAG_INLINE_ROWS + 1].count() <= RETAG_INLINE_ROWS:
        rollout_reflections_retag(run_id=run.pk)
        return False
    transaction.on_commit(lambda: queues.enqueue(queues.RETAG_REFLECTIONS, args=[run.pk]))
    return True


def rollout_reflections_retag(*, run_id: int, chunk: int = 5000) -> int:
    """Match the run's current phrase list against its stored completions; update the rows whose tags changed.
    Returns how many changed."""
    from runs.models import Rollout
    from runs.rollouts.reflection import matcher, reflection_mask

    run = Run.objects.get(pk=run_id)
    phrases = tuple(run.reflection_phrases)
    find = matcher(phrases).find
    changed, last = 0, 0
    while True:
        rows = list(Rollout.objects.filter(run=run, id__gt=last).order_by("id")
                    .only("id", "completion", "reflections", "reflection_mask")[:chunk])
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
    from runs.rollouts.exports import write_sft_jsonl

    with tempfile.TemporaryDirectory(dir=datasets_dir(), prefix=".sft-") as workdir:
        path = Path(workdir) / "sft.jsonl"
        if not write_sft_jsonl(run, data, threshold, path):
            raise DatasetError([f"no completion of this run has a reward of at least {threshold:g} with these "
                                f"filters"])
        return dataset_import(owner=run.owner, name=name or f"{run.name}: reward ≥ {threshold:g} (SFT)", path=path,
                              source_name=f"run-{run.pk}-sft.jsonl")
