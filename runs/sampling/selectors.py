"""Reads of the sampling capability: a user's jobs, a job's samples page by page."""

from __future__ import annotations

from django.core.paginator import Paginator

from runs.models import RejectionJob

SAMPLES_PAGE = 50
SAMPLE_FILTERS = {
    "kept": {"kept": True},
    "passed": {"passed": True},
    "rejected": {"passed": False},
    "duplicate": {"duplicate": True},
}


def owned_jobs(user):
    """A job is its owner's alone: anyone else gets a 404."""
    return RejectionJob.objects.filter(owner=user).select_related("dataset_version__dataset", "output_version__dataset")


def samples_page(job: RejectionJob, *, show: str = "", page: int = 1):
    samples = job.samples.filter(**SAMPLE_FILTERS.get(show, {}))
    return Paginator(samples, SAMPLES_PAGE).get_page(page)
