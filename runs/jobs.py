"""Cancelling a job and sending a lost one again, once for every job model (runs.models.Job) that a worker takes
from the queue: a run, a standalone evaluation, a rejection-sampling job. Below every capability: their services
(run_cancel, evaluation_cancel, rejection_job_cancel and the *_redispatch ones) are thin callers of these."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.db import transaction
from django.db.models import Expression, F, QuerySet
from django.utils import timezone

from grpo_web import queues
from runs.models import Job, JobStatus

J = TypeVar("J", bound=Job)


def job_cancel(*, job: J, stop_running: Callable[[J], None] | None = None) -> J:
    """Waiting (queued; a run being checked): cancelled now (the claim, or the check, then refuses its message). Running: cancelled now, and its worker, which
    sees the status within a second, stops the process; or, given ``stop_running``, only asked to stop, for jobs
    whose worker marks them cancelled itself once the process is gone (a run keeps what it ingested). Finished:
    unchanged. The row is locked meanwhile, so a cancel never crosses the worker's own change of status."""
    with transaction.atomic():
        job = type(job).objects.select_for_update().get(pk=job.pk)
        if job.status in job.WAITING or (job.status == JobStatus.RUNNING and stop_running is None):
            job.mark_cancelled()
        elif job.status == JobStatus.RUNNING:
            stop_running(job)
    return job


def jobs_redispatch(
    jobs: QuerySet,
    *,
    task: str,
    enqueue: Callable[[J], None],
    grace_seconds: float,
    queued_since: Expression = F("created_at"),
) -> list[J]:
    """The database is the source of truth for queued work: send ``task`` again for every one of ``jobs`` it holds
    as queued (since ``queued_since``, for longer than ``grace_seconds``) whose message the broker no longer has (a
    Redis restarted without its data, a message lost). Each job's claim is idempotent, so a message sent twice never
    runs a job twice. Returns the jobs sent again."""
    since = timezone.now() - timedelta(seconds=grace_seconds)
    queued = jobs.alias(queued_since=queued_since).filter(status=JobStatus.QUEUED, queued_since__lt=since)
    return queues.resend_lost(task, list(queued), enqueue)
