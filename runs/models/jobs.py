"""What the job-like models share: a dataset import, a run, an evaluation, a reward replay and a rejection-sampling
job are each queued, taken by a worker (running) and end completed, failed or cancelled. A recipe is not one of
them: it is a draft until started and queues nothing itself (its stages are runs, jobs and evaluations)."""

from django.db import models
from django.utils import timezone


class JobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"  # by its owner, or by a recipe cancelled while it ran (runs.jobs.job_cancel)


# A dataset import and a reward replay cannot be cancelled; their status columns were made without that choice (and
# a choice added is a migration).
NOT_CANCELLABLE = [(value, label) for value, label in JobStatus.choices if value != JobStatus.CANCELLED]


class Job(models.Model):
    """The status, its finished states and the end of a job as a method of its row. ``Model.Status`` is JobStatus
    for each of them (``Run.Status.QUEUED``)."""

    Status = JobStatus
    FINISHED = (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED)
    WAITING = (JobStatus.QUEUED,)  # no worker holds it yet: a cancel ends it at once (runs.jobs.job_cancel)

    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    def mark_cancelled(self):
        self.status, self.finished_at = self.Status.CANCELLED, timezone.now()
        self.save(update_fields=["status", "finished_at"])
