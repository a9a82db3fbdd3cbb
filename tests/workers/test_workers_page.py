"""The workers page names the run a worker trains only to those who may see that run; others see the worker busy."""

import pytest
from django.utils import timezone

from runs.models import Run, Worker

pytestmark = pytest.mark.django_db


@pytest.fixture
def training(owner, dataset_version):
    now = timezone.now()
    Worker.objects.create(
        name="gpu@host", hostname="host", queues=["training"], started_at=now, last_seen=now, gpus=[], vllm=False
    )
    return Run.objects.create(
        owner=owner,
        name="secret-experiment-42",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config={"max_steps": 3},
        total_steps=3,
        status=Run.Status.RUNNING,
        worker_name="gpu@host",
    )


def test_the_owner_sees_the_run_its_worker_trains(training, owner_client):
    page = owner_client.get("/workers/").content.decode()
    assert "secret-experiment-42" in page and f'href="/runs/{training.pk}/"' in page


def test_another_user_sees_the_worker_busy_not_the_runs_name(training, outsider_client):
    page = outsider_client.get("/workers/").content.decode()
    assert "secret-experiment-42" not in page
    assert ">busy<" in page and "gpu@host" in page


def test_a_cpu_worker_with_vllms_cpu_build_shows_vllm_cpu(owner_client):
    now = timezone.now()
    for name, gpus, vllm in (("cpu-vllm@host", [], True), ("gpu@big", [{"index": 0, "name": "H200"}], True)):
        Worker.objects.create(name=name, hostname="h", queues=[], started_at=now, last_seen=now, gpus=gpus, vllm=vllm)
    rows = {
        row.split("</td>")[0].split(">")[-1]: row
        for row in owner_client.get("/workers/").content.decode().split("<tr>")[2:]
    }
    assert "<td>vLLM (CPU)</td>" in rows["cpu-vllm@host"]
    assert "<td>yes</td>" in rows["gpu@big"] and "vLLM (CPU)" not in rows["gpu@big"]
