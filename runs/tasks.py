"""Default-queue tasks for the inspection pages. Adapters: take an id, call a service."""

from __future__ import annotations

from celery import shared_task


@shared_task(time_limit=6 * 3600, acks_late=True)  # the default queue (CELERY_TASK_DEFAULT_QUEUE)
def retag_reflections(run_id: int) -> int:
    """Re-tag a large run's stored completions after its reflection phrase list was edited."""
    from runs.services import rollout_reflections_retag

    return rollout_reflections_retag(run_id=run_id)
