"""Ray runs end to end: a real Celery worker submits the run to a local Ray cluster (CPU, one per session) as a Ray
job, two Ray Train workers train it under DDP (gloo), and the worker ingests the event log from the data directory.
``pytest -k ray`` selects them."""

from __future__ import annotations

import math
import os
import signal
import sys
from pathlib import Path

import pandas as pd
import psutil
import pytest
from grpo_web_protocol.events import read_events
from grpo_web_protocol.resources import parse_rank_sample, rank_folder

from rewards.models import RewardFunction
from rewards.services import reward_create
from runs.lifecycle.services import run_cancel, run_create, run_resume
from runs.lifecycle.spec import RunSpec
from runs.models import Rollout, Run, StepMetric
from runs.paths import event_log_path
from tests.conftest import wait_for
from tests.lifecycle.test_run_lifecycle import assert_complete_and_unique, refreshed
from workers.rayjobs import submission_id

pytestmark = [pytest.mark.django_db(transaction=True)]

CONFIG = {
    "num_generations": 4,
    "max_completion_length": 8,
    "per_device_train_batch_size": 4,
    "seed": 11,
    "gradient_checkpointing": False,
}


# a reward that takes a while: a step lasts at least 1.5 s, so a kill after a checkpoint lands before the last step
SLOW_DIGITS = """import time


def slow_digits(completions, **kwargs):
    time.sleep(1.5)
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]
"""


def submit_ray(owner, dataset_version, max_steps: int, reward: str = "digit_ratio", **extra) -> Run:
    """A 2-worker Ray run: each worker generates 4 completions (one prompt's group) a step, 8 in all."""
    function = RewardFunction.objects.get(owner=owner, name=reward)
    return run_create(
        owner=owner,
        spec=RunSpec(
            name="ray",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[
                {
                    "name": reward,
                    "weight": 1.0,
                    "version_id": function.latest_version.pk,
                    "version": function.latest_version.number,
                }
            ],
            config={**CONFIG, "max_steps": max_steps, **extra},
            engine="ray",
            num_workers=2,
        ),
        # the worker is up, but a transactional test's flush may have taken its row since its last beat
        queue_anyway=True,
    )


def job_status(address: str, run: Run) -> str:
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address).get_job_status(submission_id(run)).value


def _same(stored, trl) -> bool:
    if stored is None or (isinstance(stored, float) and math.isnan(stored)):
        return trl is None or (isinstance(trl, float) and math.isnan(trl))
    return stored == trl


def test_a_two_worker_ray_run_stores_trls_own_rollouts_and_metrics(ray_worker, ray_cluster, owner, dataset_version):
    run = submit_ray(owner, dataset_version, max_steps=2, log_completions=True, save_steps=0)
    wait_for(lambda: refreshed(run).is_finished, timeout=300, interval=1, what="the Ray run")
    assert run.status == Run.Status.COMPLETED, (run.error, run.log_tail)
    assert job_status(ray_cluster, run) == "SUCCEEDED"
    events, _ = read_events(event_log_path(run))
    assert [e["type"] for e in events].count("started") == 1  # rank 0 alone writes the event log
    assert "world_size=2" in (run.run_dir / "train.log").read_text()  # the job's log, copied for the Log tab
    tables = sorted((run.run_dir / "output" / "completions").glob("completions_*.parquet"))
    assert len(tables) == 2
    for path in tables:
        step = int(path.stem.split("_")[1])
        table = pd.read_parquet(path)  # TRL's own table: both ranks' completions, gathered
        rows = list(Rollout.objects.filter(run=run, step=step).order_by("index"))
        assert len(rows) == len(table) == 8
        assert [r.prompt for r in rows] == list(table["prompt"])
        assert [r.completion for r in rows] == list(table["completion"])
        assert all(_same(r.rewards[0], v) for r, v in zip(rows, table["digit_ratio"].tolist()))
        assert [r.advantage for r in rows] == table["advantage"].tolist()
        assert len({r.prompt for r in rows}) == 2  # one prompt per rank: the two ranks sampled different groups
        logged = StepMetric.objects.get(run=run, step=step).metrics
        assert sum(r.length for r in rows) / len(rows) == pytest.approx(logged["completions/mean_length"])

    # resource telemetry: each rank measured itself into its own file; the worker's samples sum the two ranks
    folder = rank_folder(run.run_dir, submission_id(run))
    ranks = [
        [parse_rank_sample(line) for line in (folder / f"rank-{r}.jsonl").read_text().splitlines()] for r in (0, 1)
    ]
    assert all(ranks) and all(s is not None and s["node"] and s["gpus"] == [] for lines in ranks for s in lines)
    samples = list(run.resource_samples.all())
    assert samples and all(s.gpus == [] and run.started_at <= s.at <= run.finished_at for s in samples)
    assert any(
        s.rss_bytes == a["rss_bytes"] + b["rss_bytes"]
        and s.cpu_percent == pytest.approx(a["cpu_percent"] + b["cpu_percent"])
        for s in samples
        for a in ranks[0]
        for b in ranks[1]
    )
    assert max(s.rss_bytes for s in samples) > max(s["rss_bytes"] for lines in ranks for s in lines)


def test_cancelling_a_ray_run_stops_its_ray_job(ray_worker, ray_cluster, owner, dataset_version):
    run = submit_ray(owner, dataset_version, max_steps=2000, save_steps=0)
    wait_for(lambda: refreshed(run).step >= 1, timeout=300, interval=1, what="a step on Ray")
    run_cancel(run=run)
    wait_for(lambda: refreshed(run).status == Run.Status.CANCELLED, timeout=60, what="the run to be cancelled")
    assert job_status(ray_cluster, run) == "STOPPED"
    assert not train_workers(ray_cluster)  # the job's Ray Train workers went with it
    assert run.step < 2000


def train_workers(ray_cluster) -> list[psutil.Process]:
    """The Ray Train worker processes of the session's cluster (descendants of its `ray start`)."""
    port = ray_cluster.rsplit(":", 1)[1]
    head = next(
        p
        for p in psutil.process_iter(["cmdline"])
        if "--block" in (cmd := p.info["cmdline"] or [])
        and "--dashboard-port" in cmd
        and cmd[cmd.index("--dashboard-port") + 1] == port
    )
    return [p for p in head.children(recursive=True) if "RayTrainWorker" in " ".join(_cmdline(p))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def test_killing_a_ray_worker_fails_the_run_and_resume_completes_it(ray_worker, ray_cluster, owner, dataset_version):
    # the kill lands after step 2's checkpoint and before the last step: 4 more steps of at least 1.5 s each (a fast
    # machine could otherwise finish the run between the checkpoint and the kill, leaving nothing to resume)
    reward_create(owner=owner, name="slow_digits", source_code=SLOW_DIGITS, entrypoint="slow_digits")
    run = submit_ray(owner, dataset_version, max_steps=6, save_steps=2, reward="slow_digits")
    wait_for(lambda: refreshed(run).checkpoint_step >= 2, timeout=300, interval=0.25, what="a checkpoint on Ray")
    workers = train_workers(ray_cluster)
    assert len(workers) == 2 and not refreshed(run).is_finished
    os.kill(workers[-1].pid, signal.SIGKILL)
    wait_for(lambda: refreshed(run).is_finished, timeout=120, interval=1, what="the run to fail")
    assert run.status == Run.Status.FAILED and run.resumable, run.error
    assert job_status(ray_cluster, run) == "FAILED"

    run_resume(run=run)  # attempt 2: a new Ray job, from the checkpoint
    wait_for(lambda: refreshed(run).is_finished, timeout=300, interval=1, what="the resumed Ray run")
    assert run.status == Run.Status.COMPLETED, (run.error, run.log_tail)
    assert run.attempt == 2 and job_status(ray_cluster, run) == "SUCCEEDED"
    assert_complete_and_unique(run, steps=6)


def test_a_ray_job_whose_nodes_cannot_see_the_data_directory_fails_with_a_clear_error(ray_cluster, tmp_path):
    from ray.job_submission import JobSubmissionClient

    from workers.training.ray_train import ERROR_PREFIX, SHARED_STORAGE_EXIT

    client = JobSubmissionClient(ray_cluster)
    marker = tmp_path / "shared-check-1"
    marker.write_text("what this worker wrote")
    job = client.submit_job(
        entrypoint=f"{sys.executable} -m workers.training.ray_train {tmp_path / 'config.json'} "
        f"--marker {marker} --token what-the-cluster-should-read",
        runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parents[2])}},
    )
    wait_for(
        lambda: client.get_job_status(job).value in ("SUCCEEDED", "FAILED", "STOPPED"),
        timeout=120,
        interval=1,
        what="the job",
    )
    assert client.get_job_status(job).value == "FAILED"
    logs = client.get_job_logs(job)
    assert f"{ERROR_PREFIX}the data directory is not shared with Ray node(s)" in logs
    assert str(marker) in logs and "GRPO_DATA_DIR" in logs
    assert str(SHARED_STORAGE_EXIT) in (client.get_job_info(job).message or "")


def test_a_verl_ray_run_reaches_verl_on_the_cluster_and_fails_clearly_without_gpus(
    ray_worker, ray_cluster, owner, dataset_version
):
    """trainer: verl on engine: ray is submitted as a verl job (not TRL's); this CPU cluster has no GPU for verl to
    place its workers on, and the run says so."""
    function = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="verl on ray",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[
                {
                    "name": "digit_ratio",
                    "weight": 1.0,
                    "version_id": function.latest_version.pk,
                    "version": function.latest_version.number,
                }
            ],
            config={**CONFIG, "max_steps": 2},
            engine="ray",
            num_workers=2,
            requested_gpus=1,
            trainer=Run.Trainer.VERL,
        ),
        queue_anyway=True,
    )
    wait_for(lambda: refreshed(run).is_finished, timeout=180, interval=1, what="the verl Ray run")
    assert run.status == Run.Status.FAILED
    assert "the Ray cluster cannot place 2 GPU(s) for verl: its live nodes have 0 GPU(s)" in run.error
    assert job_status(ray_cluster, run) == "FAILED"
    assert not Rollout.objects.filter(run=run).exists()
