"""A run that asks for GPUs or vLLM is checked against the workers that have announced themselves."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from rewards.models import RewardFunction
from runs.lifecycle.services import RunRefused, run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Run, Worker
from tests.conftest import run_form_data

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tiny_model")]  # "tiny" must load: the model check

CONFIG = {"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 4}


def announce(name: str, gpus: int, vllm: bool = False, seen_ago: float = 1.0) -> Worker:
    now = timezone.now()
    return Worker.objects.create(
        name=name,
        hostname="gpu-host",
        gpus=[{"index": i, "name": "H200"} for i in range(gpus)],
        queues=[f"training-gpu{n}" for n in range(1, gpus + 1)],
        vllm=vllm,
        started_at=now - timedelta(hours=1),
        last_seen=now - timedelta(seconds=seen_ago),
    )


def create(owner, dataset_version, gpus: int, **kwargs) -> Run:
    config = {**CONFIG, **kwargs.pop("config", {})}
    return run_create(
        owner=owner,
        spec=RunSpec(
            name="gpu",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": None, "builtin": "digit_ratio"}],
            config=config,
            requested_gpus=gpus,
        ),
        **kwargs,
    )


def refused(owner, dataset_version, gpus: int, **kwargs) -> list[str]:
    with pytest.raises(RunRefused) as caught:
        create(owner, dataset_version, gpus, **kwargs)
    assert not Run.objects.exists()
    return caught.value.errors


def test_a_gpu_run_with_no_worker_online_is_refused_with_the_reason(owner, dataset_version):
    assert refused(owner, dataset_version, 1) == [
        "requested_gpus: no online worker has 1 GPU (online: none); start one with `manage.py run_worker`, or queue "
        "anyway for a worker that is not up yet"
    ]


def test_a_worker_with_fewer_gpus_does_not_count(owner, dataset_version):
    announce("small@host", gpus=1)
    assert refused(owner, dataset_version, 2)[0].startswith(
        "requested_gpus: no online worker has 2 GPUs (online: small@host (1 GPU))"
    )


def test_a_worker_not_heard_from_for_minutes_is_offline(owner, dataset_version):
    announce("gone@host", gpus=4, seen_ago=600)
    assert refused(owner, dataset_version, 2)[0].startswith(
        "requested_gpus: no online worker has 2 GPUs (online: none)"
    )


def test_vllm_needs_a_worker_with_vllm(owner, dataset_version):
    announce("plain@host", gpus=2)
    assert refused(owner, dataset_version, 2, config={"use_vllm": True}) == [
        "use_vllm: no online worker with 2 GPUs has vLLM installed (pip install '.[gpu]' there), or queue anyway"
    ]


def test_vllm_on_cpu_needs_a_worker_with_vllms_cpu_build(owner, dataset_version):
    announce("plain-cpu@host", gpus=0)  # serves no training-vllm-cpu queue
    assert refused(owner, dataset_version, 0, config={"use_vllm": True}) == [
        "use_vllm: no online CPU worker has vLLM's CPU build; start one with `manage.py run_worker --vllm-cpu` (it "
        "builds it once: bash scripts/vllm_cpu.sh), ask for GPUs, or queue anyway"
    ]


def test_a_cpu_worker_with_vllms_cpu_build_takes_a_colocate_run_on_its_queue(
    owner, dataset_version, monkeypatch, django_capture_on_commit_callbacks
):
    now = timezone.now()
    Worker.objects.create(
        name="cpu@host",
        hostname="cpu-host",
        gpus=[],
        queues=["training", "training-vllm-cpu"],
        vllm=True,
        started_at=now,
        last_seen=now,
    )
    sent = []
    monkeypatch.setattr("grpo_web.queues.enqueue", lambda name, **kw: sent.append((name, kw["queue"])))
    with django_capture_on_commit_callbacks(execute=True):
        run = create(owner, dataset_version, 0, config={"use_vllm": True, "vllm_mode": "colocate"})
    assert run.status == Run.Status.QUEUED
    assert sent == [("workers.tasks.train_run", "training-vllm-cpu")]
    with django_capture_on_commit_callbacks(execute=True):  # a CPU run without vLLM still goes to any CPU worker
        create(owner, dataset_version, 0)
    assert sent[-1] == ("workers.tasks.train_run", "training")


def test_vllm_server_mode_without_a_gpu_is_refused_with_the_reason_even_queued_anyway(owner, dataset_version):
    errors = refused(owner, dataset_version, 0, config={"use_vllm": True, "vllm_mode": "server"}, queue_anyway=True)
    # the reason is TRL's own (tests/workers/test_vllm_cpu.py: its client refuses to sync weights to a CPU device)
    assert len(errors) == 1 and errors[0].startswith("vllm_mode: server mode needs a GPU")
    assert "NCCL" in errors[0] and "colocate" in errors[0]


def test_a_worker_with_the_gpus_and_vllm_takes_it(owner, dataset_version):
    announce("big@host", gpus=8, vllm=True)
    assert create(owner, dataset_version, 2, config={"use_vllm": True}).status == Run.Status.QUEUED


def test_queue_anyway_queues_for_a_worker_that_is_not_up_yet(owner, dataset_version):
    assert create(owner, dataset_version, 4, queue_anyway=True).status == Run.Status.QUEUED


def test_a_cpu_run_is_never_refused_for_capacity(owner, dataset_version):
    assert create(owner, dataset_version, 0).status == Run.Status.QUEUED


def test_the_run_form_shows_the_reason_and_offers_queue_anyway(owner_client, owner, dataset_version):
    data = run_form_data(owner)
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    data.update(
        {
            "name": "gpu",
            "model": "tiny",
            "dataset_version": dataset_version.pk,
            "requested_gpus": 1,
            f"reward_{digits.pk}": "on",
            f"weight_{digits.pk}": "1",
            f"version_{digits.pk}": "1",
        }
    )
    response = owner_client.post(reverse("run_new"), data)
    assert response.status_code == 400
    body = response.content.decode()
    assert "requested_gpus: no online worker has 1 GPU (online: none)" in body
    assert 'name="queue_anyway"' in body
    assert not Run.objects.exists()
