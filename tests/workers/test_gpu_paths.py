"""The GPU code paths: vLLM colocate and server mode, and multi-GPU runs through accelerate.

The command lines and configs are checked everywhere; the runs themselves need GPUs (and vLLM) and skip cleanly
without them. bench/gpu_smoke.sh runs them on a GPU machine."""

import os
import shutil
import socket
import subprocess

import pytest
from django.utils import timezone
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig

from rewards.models import RewardFunction
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Run
from tests.conftest import start_worker, wait_for
from workers.registry import detect_gpus, vllm_installed
from workers.supervisor import training_command


def _gpus() -> int:
    return len(detect_gpus())


def needs(gpus: int, vllm: bool = False):
    reason = f"needs {gpus} CUDA GPU(s){' and vLLM' if vllm else ''}; this machine has {_gpus()}" + (
        "" if not vllm or vllm_installed() else " and no vLLM"
    )
    return pytest.mark.skipif(_gpus() < gpus or (vllm and not vllm_installed()), reason=reason)


def test_a_multi_gpu_run_starts_through_accelerate(tmp_path):
    run = Run(requested_gpus=4)
    command = training_command(run, tmp_path / "c.json")
    assert command[1:6] == ["-m", "accelerate.commands.launch", "--num_processes", "4", "-m"]
    assert command[-2:] == ["workers.training.train", str(tmp_path / "c.json")]
    assert training_command(Run(requested_gpus=1), tmp_path / "c.json")[1:3] == ["-m", "workers.training.train"]


def test_a_verl_run_starts_verls_launcher_whatever_its_gpus(tmp_path):
    for gpus in (1, 4):
        command = training_command(Run(requested_gpus=gpus, trainer="verl"), tmp_path / "c.json")
        assert command[1:] == ["-m", "workers.training.verl_run", str(tmp_path / "c.json")]


def test_vllm_server_mode_points_trl_at_the_workers_server(tmp_path):
    from workers.training.train import grpo_config

    config = TrainConfig(
        model="m",
        dataset_path="d",
        output_dir=str(tmp_path),
        event_log="e",
        rewards=[RewardSpec("r", builtin="digit_ratio")],
        grpo=GRPOFields(use_vllm=True, vllm_mode="server", bf16="no"),
        vllm_server_port=51234,
    )
    args = grpo_config(config)
    assert (args.use_vllm, args.vllm_mode, args.vllm_server_host, args.vllm_server_port) == (
        True,
        "server",
        "127.0.0.1",
        51234,
    )


def _gpu_run(owner, dataset_version, service_env, tmp_path, gpus, trainer="trl", **config):
    name = f"gpu-{socket.gethostname()}"
    queues = ",".join(f"training-gpu{n}" for n in range(1, gpus + 1))
    worker = start_worker(service_env, name, queues, tmp_path / "gpu-worker.log")
    try:
        digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
        run = run_create(
            owner=owner,
            spec=RunSpec(
                name="gpu",
                model="tiny",
                dataset_version=dataset_version,
                rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk}],
                config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 4, **config},
                requested_gpus=gpus,
                trainer=trainer,
            ),
            queue_anyway=True,
        )  # the worker may not have announced itself yet
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
@needs(1, vllm=True)
@pytest.mark.django_db(transaction=True)
def test_a_verl_run_completes_with_its_rollouts_and_metrics_stored(
    celery_worker, owner, dataset_version, service_env, tmp_path
):
    from runs.models import Rollout, StepMetric

    run = _gpu_run(owner, dataset_version, service_env, tmp_path, 1, trainer="verl", vllm_gpu_memory_utilization=0.3)
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail
    assert StepMetric.objects.filter(run=run, metrics__has_key="reward").count() == 4
    rows = Rollout.objects.filter(run=run)
    assert rows.count() == 4 * 8 and not rows.filter(advantage__isnull=True).exists()
    assert (run.run_dir / "output" / "final" / "config.json").exists()  # verl's merger: what evaluations load


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
        assert len(detect_gpus()) == len(
            subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.strip().splitlines()
        )


# --- placement: checked everywhere (pure functions and a fake nvidia-smi); the GPU smoke runs them for real ---------


def _run(gpus: int, **config) -> Run:
    return Run(requested_gpus=gpus, config={"use_vllm": bool(config.get("vllm_mode")), **config})


def test_the_vllm_server_gets_a_gpu_of_its_own_apart_from_training():
    from workers.placement import gpu_plan

    assert gpu_plan(_run(2, vllm_mode="server"), ["0", "1", "2", "3"]) == (["0", "1"], "2")
    assert gpu_plan(_run(2, vllm_mode="server"), ["4", "5", "6"]) == (["4", "5"], "6")  # CUDA_VISIBLE_DEVICES order
    assert gpu_plan(_run(2, vllm_mode="colocate"), ["0", "1", "2"]) == (["0", "1"], None)
    assert gpu_plan(_run(1), ["0", "1"]) == (["0"], None)
    assert gpu_plan(_run(2, vllm_mode="server"), []) == ([], None)  # no GPU at all: placement is moot
    with pytest.raises(RuntimeError, match="sees 1 GPU.*needs 2 .*vLLM server"):
        gpu_plan(_run(1, vllm_mode="server"), ["0"])


def test_routing_counts_the_servers_gpu(owner, dataset_version, db):
    from runs.lifecycle.services import capacity_problems
    from runs.models import Worker

    assert _run(2, vllm_mode="server").gpus_needed == 3 and _run(2, vllm_mode="colocate").gpus_needed == 2
    now = timezone.now()
    Worker.objects.create(
        name="two@gpu",
        hostname="gpu",
        queues=["training-gpu1", "training-gpu2"],
        gpus=[{"index": 0}, {"index": 1}],
        vllm=True,
        started_at=now,
        last_seen=now,
    )
    assert capacity_problems(gpus=2, use_vllm=True) == []
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    with pytest.raises(Exception, match="no online worker has 3 GPUs"):
        run_create(
            owner=owner,
            spec=RunSpec(
                name="server",
                model="tiny",
                dataset_version=dataset_version,
                rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk}],
                config={
                    "num_generations": 4,
                    "per_device_train_batch_size": 8,
                    "max_steps": 2,
                    "use_vllm": True,
                    "vllm_mode": "server",
                },
                requested_gpus=2,
            ),
        )


def test_each_rank_starts_its_sandboxes_in_slots_of_its_own(monkeypatch):
    from workers.training.rewarding import rank_slot

    slots = {}
    for rank in range(4):
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        slots[rank] = {rank_slot(100, i, 3) for i in range(3)}
    assert len(set().union(*slots.values())) == 12  # no two ranks share a slot (a uid, a scratch)


def test_rewards_tools_and_the_environment_of_every_rank_get_slots_of_their_own(monkeypatch):
    from grpo_web_protocol.config import ToolSpec

    from workers.training import rewarding, tooling

    seen = []  # (rank, slot) of every sandbox each rank starts
    monkeypatch.setattr(rewarding, "SandboxedReward", lambda spec, *, slot, **kw: seen.append(slot))
    monkeypatch.setattr(tooling, "SandboxedTool", lambda *a, slot, **kw: seen.append(slot))
    monkeypatch.setattr(tooling, "SandboxedEnvironment", lambda *a, slot, **kw: seen.append(slot))
    monkeypatch.setattr("rewards.toolspec.stand_in", lambda signature, tool: tool)
    monkeypatch.setattr("rewards.toolspec.stand_in_class", lambda signature, backend: backend)
    config = TrainConfig(
        model="m",
        dataset_path="d",
        output_dir="o",
        event_log="e",
        sandbox_slot_base=100,
        rewards=[
            RewardSpec(f"r{i}", source="def r(completions, **kw):\n    return [0.0]\n", entrypoint="r")
            for i in range(2)
        ],
        tools=[ToolSpec("calculator", builtin="calculator", entrypoint="calculator")],
        environment=ToolSpec("calculator_session", builtin="calculator_session", entrypoint="CalculatorSession"),
    )
    for rank in range(3):
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        rewarding.reward_functions(config)
        tooling.tool_functions(config)
        tooling.environment_factory(config)
    assert len(seen) == 12 and len(set(seen)) == 12  # 3 ranks x (2 rewards + 1 tool + 1 environment), none shared


def test_only_rank_0_writes_the_event_log(monkeypatch, tmp_path):
    from grpo_web_protocol.events import EventWriter, NullEventWriter

    from workers.training.train import event_writer

    config = TrainConfig(
        model="m",
        dataset_path="d",
        output_dir=str(tmp_path),
        event_log=str(tmp_path / "e.jsonl"),
        rewards=[RewardSpec("r", builtin="digit_ratio")],
    )
    monkeypatch.setenv("RANK", "1")
    writer = event_writer(config)
    assert isinstance(writer, NullEventWriter)
    writer.write("started", total_steps=3)
    assert not (tmp_path / "e.jsonl").exists()
    monkeypatch.setenv("RANK", "0")
    assert isinstance(event_writer(config), EventWriter)


def test_gpu_telemetry_reports_the_runs_gpus_only(tmp_path, monkeypatch):
    from runs.telemetry.sampler import ResourceSampler

    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\nfor i in 0 1 2 3; do echo "$i, GPU-$i, 50, 1000, 80000"; done\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = ResourceSampler(Run(pk=1), os.getpid(), gpus="1,2")
    assert [g["index"] for g in sampler.measure_gpus()] == [1, 2]
