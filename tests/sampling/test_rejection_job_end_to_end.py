"""A rejection-sampling job run by a real Celery worker: the sampling program scores in the sandbox, the kept samples
become a dataset an SFT run can train on."""

import pytest

from rewards.models import RewardFunction
from runs.models import RejectionJob, RejectionSample
from runs.sampling.services import RejectionSettings, rejection_job_create
from tests.conftest import wait_for
from workers.registry import detect_gpus, vllm_installed

pytestmark = [pytest.mark.django_db(transaction=True)]


def _finished(job):
    job.refresh_from_db()
    return job.is_finished


def test_a_job_samples_scores_and_saves_what_it_keeps(celery_worker, owner, dataset_version):
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio").latest_version
    job = rejection_job_create(
        owner=owner,
        name="digits kept",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.pk, "version": digits.number}],
        settings=RejectionSettings(
            k=4, threshold=0.05, solved_by="digit_ratio", max_per_prompt=2, max_prompts=6, max_new_tokens=12
        ),
    )
    wait_for(lambda: _finished(job), timeout=180, what="the job to finish")
    assert job.status == RejectionJob.Status.COMPLETED, job.error + job.log_tail
    samples = list(RejectionSample.objects.filter(job=job))
    assert len(samples) == 6 * 4 and job.stats["samples"] == 24
    kept = [s for s in samples if s.kept]
    assert kept and all(s.rewards[0] >= 0.05 for s in kept)
    assert all(not s.passed for s in samples if s.rewards[0] is None or s.rewards[0] < 0.05)
    per_prompt = {}
    for s in kept:
        per_prompt[s.prompt_index] = per_prompt.get(s.prompt_index, 0) + 1
    assert max(per_prompt.values()) <= 2
    version = job.output_version
    assert version.row_count == len(kept) and version.provenance["job"] == job.pk
    assert "completion" in version.columns
    assert job.stats["generator"] == ("vllm" if vllm_installed() and detect_gpus() else "transformers")
