"""Resource telemetry per run: the worker samples the training process tree and the GPUs, the training program
times each step's parts, and the run page draws both from telemetry.json."""

import os
import shutil
import socket
import subprocess
import sys
from datetime import timedelta

import psutil
import pytest
from django.urls import reverse
from django.utils import timezone
from grpo_web_protocol.resources import parse_nvidia_smi

from rewards.models import RewardFunction
from runs.models import ResourceSample, Run, StepMetric
from runs.telemetry.sampler import ResourceSampler
from runs.telemetry.selectors import MAX_POINTS
from tests.conftest import log_in, start_worker, stop_process, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

QUEUE = "telemetry"


def _run(owner, dataset_version, **fields):
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    return Run.objects.create(
        owner=owner,
        name="telemetry",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk}],
        config={
            "num_generations": 4,
            "max_completion_length": 8,
            "per_device_train_batch_size": 8,
            "seed": 3,
            "max_steps": 4,
        },
        total_steps=4,
        **fields,
    )


@pytest.fixture
def sampling_worker(service_env, tiny_model, tmp_path):
    """A worker of its own, on a queue of its own, that samples every 0.2 s."""
    name = f"telemetry-{os.getpid()}@{socket.gethostname()}"
    proc = start_worker({**service_env, "GRPO_TELEMETRY_SECONDS": "0.2"}, name, QUEUE, tmp_path / "worker.log")
    yield proc
    stop_process(proc)


def test_a_trained_run_has_resource_samples_and_each_steps_time_split(
    sampling_worker, owner, owner_client, dataset_version
):
    from workers.tasks import train_run

    run = _run(owner, dataset_version)
    train_run.apply_async(args=[run.pk], queue=QUEUE)
    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, timeout=180, what="the run to finish")
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail

    samples = list(run.resource_samples.all())
    assert len(samples) >= 2
    for s in samples:
        assert run.started_at <= s.at <= run.finished_at
        assert s.cpu_percent >= 0 and s.rss_bytes > 0 and 0 <= s.step <= 4
    assert [s.step for s in samples] == sorted(s.step for s in samples)
    assert max(s.cpu_percent for s in samples) > 0  # the process tree was measured, not just primed

    data = owner_client.get(reverse("run_telemetry_json", args=[run.pk])).json()
    got = data["samples"]
    assert got["step"] == [s.step for s in samples]
    assert got["rss_mb"] == pytest.approx([s.rss_bytes / 1e6 for s in samples])
    assert got["t"] == pytest.approx([(s.at - run.started_at).total_seconds() for s in samples])
    if shutil.which("nvidia-smi") is None:
        assert got["gpus"] == {} and all(s.gpus == [] for s in samples)
    assert data["finished"] is True

    t = data["timing"]
    assert t["steps"] == [1, 2, 3, 4]
    for i in range(4):
        parts = [t["generation_s"][i], t["reward_s"][i], t["update_s"][i]]
        assert all(p >= 0 for p in parts) and t["generation_s"][i] > 0 and t["reward_s"][i] > 0
        assert sum(parts) == pytest.approx(t["step_s"][i], rel=1e-9, abs=1e-9)
        assert t["tokens_per_s"][i] > 0
    summary = data["summary"]
    assert summary["generation_share"] + summary["reward_share"] + summary["update_share"] == pytest.approx(1)
    assert summary["peak_rss_mb"] == pytest.approx(max(s.rss_bytes for s in samples) / 1e6)


NVIDIA_SMI = """\
0, GPU-5f2a8c1e-0000-1111-2222-333344445555, 87, 40536, 81559
1, GPU-9b7d0e3f-6666-7777-8888-999900001111, 0, 3, 81559
2, GPU-1c2d3e4f-aaaa-bbbb-cccc-ddddeeeeffff, [N/A], 1024, 81559
"""


def test_nvidia_smi_output_is_read_for_the_visible_gpus_only():
    everything = parse_nvidia_smi(NVIDIA_SMI, None)
    assert everything[0] == {"index": 0, "util": 87.0, "mem_used": 40536 * 2**20, "mem_total": 81559 * 2**20}
    assert [g["index"] for g in everything] == [0, 1, 2]
    assert everything[2]["util"] is None  # [N/A]: unknown, not zero
    assert [g["index"] for g in parse_nvidia_smi(NVIDIA_SMI, "2,0")] == [0, 2]
    assert [g["index"] for g in parse_nvidia_smi(NVIDIA_SMI, "GPU-9b7d0e3f")] == [1]
    assert parse_nvidia_smi(NVIDIA_SMI, "") == []
    assert parse_nvidia_smi("NVIDIA-SMI has failed because it couldn't communicate with the driver.", None) == []


def test_the_sampler_measures_the_whole_process_tree_and_stops_quietly_when_it_exits(owner, dataset_version, settings):
    settings.GRPO_TELEMETRY_SECONDS = 0
    run = _run(owner, dataset_version, step=2)
    # a parent that sleeps and a child that holds 64 MB: the sample counts both
    child = "b = b'x' * 64 * 2**20; import time; time.sleep(60)"
    parent = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", parent], start_new_session=True)
    try:
        wait_for(
            lambda: (
                psutil.Process(proc.pid).children()
                and psutil.Process(proc.pid).children()[0].memory_info().rss > 64 * 2**20
            ),
            timeout=20,
            what="the child to allocate",
        )
        sampler = ResourceSampler(run, proc.pid)
        sampler.nvidia_smi = "/bin/false"  # an nvidia-smi that fails: no GPUs, and no more tries
        sample = sampler.tick()
        kid = psutil.Process(proc.pid).children()[0]
        assert set(sampler.procs) == {proc.pid, kid.pid}
        assert sample.rss_bytes >= kid.memory_info().rss + psutil.Process(proc.pid).memory_info().rss - 2**20
        assert sample.step == 2 and sample.cpu_percent >= 0 and sample.gpus == []
        assert sampler.nvidia_smi is None
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert sampler.tick() is None
    assert ResourceSample.objects.filter(run=run).count() == 1


def test_long_runs_are_thinned_to_a_bounded_series_keeping_the_last_point_and_the_true_peak(
    owner, owner_client, dataset_version
):
    start = timezone.now() - timedelta(days=1)
    run = _run(owner, dataset_version, status=Run.Status.COMPLETED, started_at=start)
    n = 2 * MAX_POINTS
    # every other row is kept, counted back from the last; the first row holds the peak and is dropped
    ResourceSample.objects.bulk_create(
        ResourceSample(
            run=run, at=start + timedelta(seconds=i), step=i, cpu_percent=100.0, rss_bytes=(9 if i == 0 else 1) * 10**9
        )
        for i in range(n)
    )
    StepMetric.objects.bulk_create(
        StepMetric(
            run=run,
            step=s,
            metrics={"timing/step_s": 2.0, "timing/generation_s": 1.0, "timing/reward_s": 0.5, "timing/update_s": 0.5},
        )
        for s in range(1, MAX_POINTS + 2)
    )
    data = owner_client.get(reverse("run_telemetry_json", args=[run.pk])).json()
    assert len(data["samples"]["t"]) <= MAX_POINTS
    assert data["samples"]["step"][-1] == n - 1 and data["samples"]["step"][:2] == [1, 3]
    assert data["summary"]["peak_rss_mb"] == 9000
    assert 0 < len(data["timing"]["steps"]) <= MAX_POINTS and data["timing"]["steps"][-1] == MAX_POINTS + 1
    assert data["summary"]["generation_share"] == pytest.approx(0.5)


def test_an_outsider_gets_404_for_the_telemetry(outsider_client, owner, dataset_version):
    run = _run(owner, dataset_version)
    assert outsider_client.get(reverse("run_telemetry_json", args=[run.pk])).status_code == 404


def test_the_run_page_draws_the_resource_charts_and_summary(web_server, owner, dataset_version, page):
    start = timezone.now() - timedelta(minutes=5)
    run = _run(
        owner,
        dataset_version,
        status=Run.Status.COMPLETED,
        started_at=start,
        finished_at=start + timedelta(seconds=30),
        step=4,
    )
    StepMetric.objects.bulk_create(
        StepMetric(
            run=run,
            step=s,
            metrics={
                "reward": 0.1 * s,
                "timing/step_s": 2.0,
                "timing/generation_s": 1.1,
                "timing/reward_s": 0.06,
                "timing/update_s": 0.84,
                "timing/tokens_per_s": 50.0,
            },
        )
        for s in range(1, 5)
    )
    gpus = [{"index": 0, "util": 55.0, "mem_used": 10**9, "mem_total": 8 * 10**9}]
    ResourceSample.objects.bulk_create(
        ResourceSample(
            run=run,
            at=start + timedelta(seconds=2 * i),
            step=i,
            cpu_percent=150.0,
            rss_bytes=(700 + 28 * i) * 10**6,
            gpus=gpus,
        )
        for i in range(5)
    )

    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/#resources")
    for chart in ("step-split", "tokens", "cpu", "rss", "gpu-util", "gpu-mem"):
        page.wait_for_selector(f"#panel-resources #chart-{chart} .main-svg")
    assert page.locator("#chart-step-split .bars .point").count() == 12  # 4 steps x 3 parts
    assert (
        page.inner_text("#resource-summary")
        == "generation 55% · rewards 3% · update 42% of step time; peak RAM 812 MB; 50 tokens/s"
    )
    assert page.text_content("#figure-step-time") == "2.00 s (step 4)"  # on the Overview tab
    page.click("#tab-metrics")
    page.wait_for_selector("#chart-reward .main-svg")  # the metric charts still draw: both share one event stream
