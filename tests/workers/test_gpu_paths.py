"""The GPU code paths: vLLM colocate and server mode, and multi-GPU runs through accelerate.

The command lines and configs are checked everywhere; the runs themselves need GPUs (and vLLM) and skip cleanly
without them. bench/gpu_smoke.sh runs them on a GPU machine."""

import shutil
import socket
import subprocess

import pytest

from rewards.models import RewardFunction
from runs.lifecycle.services import run_create
from runs.models import Run
from runs.protocol.config import GRPOFields, RewardSpec, TrainConfig
from tests.conftest import start_worker, wait_for
from workers.registry import detect_gpus, vllm_installed
from workers.supervisor import training_command


def _gpus() -> int:
    return len(detect_gpus())


def needs(gpus: int, vllm: bool = False):
    reason = f"needs {gpus} CUDA GPU(s){' and vLLM' if vllm else ''}; this machine has {_gpus()}" + (
        "" if not vllm or vllm_installed() else " and no vLLM")
    return pytest.mark.skipif(_gpus() < gpus or (vllm and not vllm_installed()), reason=reason)


def test_a_multi_gpu_run_starts_through_accelerate(tmp_path):
    run = Run(requested_gpus=4)
    command = training_command(run, tmp_path / "c.json")
    assert command[1:6] == ["-m", "accelerate.commands.launch", "--num_processes", "4", "-m"]
    assert command[-2:] == ["workers.train", str(tmp_path / "c.json")]
    assert training_command(Run(requested_gpus=1), tmp_path / "c.json")[1:3] == ["-m", "workers.train"]


def test_vllm_server_mode_points_trl_at_the_workers_server(tmp_path):
    from workers.train import grpo_config

    config = TrainConfig(model="m", dataset_path="d", output_dir=str(tmp_path), event_log="e",
                         rewards=[RewardSpec("r", builtin="digit_ratio")],
                         grpo=GRPOFields(use_vllm=True, vllm_mode="server", bf16="no"), vllm_server_port=51234)
    args = grpo_config(config)
    assert (args.use_vllm, args.vllm_mode, args.vllm_server_host, args.vllm_server_port) == (
        True, "server", "127.0.0.1", 51234)


def _gpu_run(owner, dataset_version, service_env, tmp_path, gpus, **config):
    name = f"gpu-{socket.gethostname()}"
    queues = ",".join(f"training-gpu{n}" for n in range(1, gpus + 1))
    worker = start_worker(service_env, name, queues, tmp_path / "gpu-worker.log")
    try:
        digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
        run = run_create(owner=owner, name="gpu", model="tiny", dataset_version=dataset_version,
                         rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk}],
                         config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 4, **config},
                         requested_gpus=gpus, queue_anyway=True)  # the worker may not have announced itself yet
        wait_for(lambda: run.refresh_from_db() or run.is_finished, timeout=900, what="the GPU run")
        return run
    finally:
        worker.terminate()
        worker.wait(timeout=60)


@pytest.mark.requires_gpu
@needs(1, vllm=True)
@pytest.mark.django_db(transaction=True)
def test_a_vllm_colocate_run_completes(celery_worker, owner, dataset_version, service_env, tmp_path):
    run = _gpu_run(owner, dataset_version, service_env, tmp_path, 1, use_vllm=True, vllm_mode="colocate")
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail


@pytest.mark.requires_gpu
@needs(2, vllm=True)
@pytest.mark.django_db(transaction=True)
def test_a_vllm_server_run_completes(celery_worker, owner, dataset_version, service_env, tmp_path):
    run = _gpu_run(owner, dataset_version, service_env, tmp_path, 2, use_vllm=True, vllm_mode="server")
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail


@pytest.mark.requires_gpu
@needs(2)
@pytest.mark.django_db(transaction=True)
def test_a_two_gpu_run_completes(celery_worker, owner, dataset_version, service_env, tmp_path):
    run = _gpu_run(owner, dataset_version, service_env, tmp_path, 2)
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail


def test_nvidia_smi_is_read_when_present():
    if shutil.which("nvidia-smi") is None:
        assert detect_gpus() == []
    else:
        assert len(detect_gpus()) == len(subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                                        text=True).stdout.strip().splitlines())
