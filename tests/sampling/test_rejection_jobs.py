"""Rejection-sampling jobs: what passes, what is kept (at most m per prompt, the same text once), the mixed-in rows,
the new dataset and its provenance; the form's refusals; the owner alone sees a job."""

import io
import json

import pytest
from django.urls import reverse

from rewards.models import RewardFunction
from runs.models import RejectionJob, RejectionSample
from runs.sampling.services import (
    JobRefused,
    RejectionSettings,
    rejection_job_create,
    rejection_job_store,
    select_samples,
)

pytestmark = pytest.mark.django_db


def _row(p, s, completion, reward, correct, greedy=False):
    return {
        "prompt_index": p,
        "sample": s,
        "greedy": greedy,
        "prompt": f"What is {p} + {p}?",
        "completion": completion,
        "rewards": [reward],
        "reward": reward,
        "correct": correct,
        "length": 3,
        "truncated": False,
        "columns": {"answer": str(2 * p)},
    }


EVENT = {
    "k": 4,
    "solved_by": "accuracy",
    "threshold": 1.0,
    "prompts": 3,
    "seconds": 1.0,
    "rows": [
        _row(0, 0, "<think>0+0</think> \\boxed{0}", 1.0, True),
        _row(0, 1, "<think>0+0</think>  \\boxed{0} ", 1.0, True),
        _row(0, 2, "\\boxed{0}", 1.0, True),
        _row(0, 3, "\\boxed{7}", 0.0, False),
        _row(1, 0, "\\boxed{5}", 0.0, False),
        _row(1, 1, "\\boxed{2}", 1.0, True),
        _row(1, 2, "x", 0.0, False),
        _row(1, 3, "y", 0.0, False),
        _row(2, 0, "a", 0.0, False),
        _row(2, 1, "b", 0.0, False),
        _row(2, 2, "c", 0.0, False),
        _row(2, 3, "d", 0.0, False),
        _row(0, 4, "\\boxed{0}", 1.0, True, greedy=True),
    ],
}


@pytest.fixture
def job(owner, dataset_version, tiny_model):
    accuracy = RewardFunction.objects.get(owner=owner, name="accuracy").latest_version
    return RejectionJob.objects.create(
        owner=owner,
        name="kept traces",
        model="tiny",
        dataset_version=dataset_version,
        split="all",
        rewards=[{"name": "accuracy", "weight": 1.0, "version_id": accuracy.pk, "version": accuracy.number}],
        settings={**RejectionSettings(k=4, max_per_prompt=2).__dict__},
        status=RejectionJob.Status.RUNNING,
    )


def test_at_most_m_passing_samples_per_prompt_are_kept_and_the_same_text_once():
    rows = {(r["prompt_index"], r["sample"]): r for r in select_samples(EVENT["rows"], max_per_prompt=2)}
    assert len(rows) == 12  # the greedy completion is not a sample
    assert [rows[0, s]["kept"] for s in range(4)] == [True, False, True, False]
    assert rows[0, 1]["duplicate"] and rows[0, 1]["passed"]  # whitespace aside, the same text as sample 0
    assert [rows[1, s]["kept"] for s in range(4)] == [False, True, False, False]
    assert not any(rows[2, s]["kept"] for s in range(4))


def test_the_kept_samples_become_a_dataset_with_their_provenance(job):
    rejection_job_store(job=job, event=EVENT)
    job.refresh_from_db()
    assert job.status == "completed" and job.stats["kept"] == 3 and job.stats["duplicates"] == 1
    assert job.stats["kept_share_per_prompt"] == {"0": 0.5, "1": 0.25, "2": 0.0}
    version = job.output_version
    assert version.row_count == 3 and {"prompt", "completion", "answer"} <= set(version.columns)
    assert version.dataset.owner == job.owner and version.dataset.name == "kept traces"
    p = version.provenance
    assert (p["model"], p["solved_by"], p["threshold"], p["k"], p["max_per_prompt"]) == ("tiny", "accuracy", 1.0, 4, 2)
    assert p["rewards"] == [{"name": "accuracy", "weight": 1.0, "version": job.rewards[0]["version"]}]
    assert p["prompts_from"]["dataset_version"] == job.dataset_version_id and p["kept"] == 3
    assert RejectionSample.objects.filter(job=job).count() == 12
    assert RejectionSample.objects.filter(job=job, kept=True).count() == 3


def test_rows_of_another_dataset_are_mixed_in(job, owner):
    from runs.datasets.services import dataset_import
    from workers.training.coldstart import cold_start_rows

    data = "".join(json.dumps(r) + "\n" for r in cold_start_rows(10)).encode()
    other = dataset_import(owner=owner, name="general", stream=io.BytesIO(data), source_name="g.jsonl")
    job.mix_version, job.settings = other, {**job.settings, "mix_rows": 4}
    job.save()
    rejection_job_store(job=job, event=EVENT)
    job.refresh_from_db()
    assert job.output_version.row_count == 3 + 4 and job.stats["mixed_in"] == 4
    assert set(job.output_version.columns) == {"prompt", "completion"}  # only the columns every row has
    assert job.output_version.provenance["mixed_in"]["rows"] == 4


def test_a_job_that_keeps_nothing_fails_with_the_reason(job):
    from runs.datasets.importing import DatasetError

    with pytest.raises(DatasetError, match="no sample reached accuracy ≥ 1"):
        rejection_job_store(job=job, event={**EVENT, "rows": [r for r in EVENT["rows"] if not r["correct"]]})


def test_a_job_is_refused_with_each_reason(owner, dataset_version, tiny_model):
    with pytest.raises(JobRefused) as refused:
        rejection_job_create(
            owner=owner,
            name="x",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[],
            settings=RejectionSettings(k=0, solved_by="nope", mix_rows=3),
        )
    errors = " | ".join(refused.value.errors)
    assert "k: must be at least 1" in errors and "solved_by: 'nope'" in errors
    assert "rewards: pick at least one" in errors and "mix_version: pick the dataset" in errors


def test_the_form_queues_a_job(owner_client, owner, dataset_version, tiny_model, monkeypatch):
    monkeypatch.setattr("runs.sampling.services._enqueue", lambda job: None)
    accuracy = RewardFunction.objects.get(owner=owner, name="accuracy")
    data = {
        "name": "traces",
        "model": "tiny",
        "dataset_version": dataset_version.pk,
        "split": "all",
        "rewards": [accuracy.pk],
        "k": 4,
        "threshold": 1.0,
        "solved_by": "",
        "max_per_prompt": 1,
        "temperature": 1.0,
        "max_new_tokens": 24,
        "max_prompts": 8,
        "mix_rows": 0,
        "seed": 0,
    }
    response = owner_client.post(reverse("rejection_job_new"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    job = RejectionJob.objects.get(name="traces")
    assert job.settings["k"] == 4 and job.settings["max_prompts"] == 8 and job.rewards[0]["name"] == "accuracy"
    assert owner_client.get(job.get_absolute_url()).status_code == 200


@pytest.mark.parametrize("pick", ["99999999999999999999999999", "-99999999999999999999999999", "1e3", "x"])
def test_a_reward_picked_by_a_key_no_row_can_have_is_a_form_error(owner_client, dataset_version, pick):
    """On SQLite a key past 64 bits could not even be bound: it was a 500 (issue 30, item 9)."""
    data = {
        "name": "traces",
        "model": "tiny",
        "dataset_version": dataset_version.pk,
        "split": "all",
        "rewards": [pick],
        "k": 4,
        "threshold": 1.0,
        "max_per_prompt": 1,
        "temperature": 1.0,
        "max_new_tokens": 24,
        "max_prompts": 8,
        "mix_rows": 0,
        "seed": 0,
    }
    response = owner_client.post(reverse("rejection_job_new"), data)
    assert response.status_code == 400
    assert "is not a valid value" in response.content.decode()
    assert not RejectionJob.objects.exists()


def test_an_outsider_gets_404_for_a_job(job, outsider_client):
    rejection_job_store(job=job, event=EVENT)
    for name in ("rejection_job_detail", "rejection_job_status"):
        assert outsider_client.get(reverse(name, args=[job.pk])).status_code == 404
    assert "kept traces" not in outsider_client.get(reverse("rejection_jobs")).content.decode()


def test_the_owner_browses_the_samples_and_the_provenance(job, owner_client):
    rejection_job_store(job=job, event=EVENT)
    page = owner_client.get(reverse("rejection_job_detail", args=[job.pk]) + "?show=kept").content.decode()
    assert page.count('<tr class="kept">') == 3 and "rejected" not in page.split('id="samples"')[1].split("</nav>")[1]
    version = job.output_version
    page = owner_client.get(version.get_absolute_url()).content.decode()
    assert 'id="version-provenance"' in page and "accuracy ≥ 1.0" in page
