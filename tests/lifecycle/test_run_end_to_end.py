"""A run submitted through the service, trained by a real Celery worker on real Redis, stored in the database."""

import shutil
import socket
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from django.conf import settings

from rewards.models import RewardFunction
from runs.lifecycle.services import RunRefused, run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Rollout, Run, StepMetric
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

WEIGHTS = {"digit_ratio": 1.0, "think_format": 0.5, "accuracy": 2.0}


def _rewards(owner):
    """The owner's copies of the library functions, pinned at their latest version (they run in the sandbox)."""
    return [
        {
            "name": name,
            "weight": weight,
            "version_id": RewardFunction.objects.get(owner=owner, name=name).latest_version.pk,
        }
        for name, weight in WEIGHTS.items()
    ]


def _submit(owner, dataset_version, model="tiny", **config):
    base = {
        "num_generations": 4,
        "max_completion_length": 16,
        "learning_rate": 1e-2,
        "beta": 0.0,
        "epsilon": 0.2,
        "temperature": 1.0,
        "max_steps": 3,
        "per_device_train_batch_size": 8,
        "seed": 7,
        "loss_type": "dapo",
        "scale_rewards": "group",
        "log_completions": True,
    }
    return run_create(
        owner=owner,
        spec=RunSpec(
            name="e2e", model=model, dataset_version=dataset_version, rewards=_rewards(owner), config={**base, **config}
        ),
    )


def _finished(run):
    run.refresh_from_db()
    return run.is_finished


def test_stored_rewards_and_advantages_are_trls_own(celery_worker, owner, dataset_version):
    run = _submit(owner, dataset_version)
    wait_for(lambda: _finished(run), timeout=180, what="the run to finish")
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail
    assert run.step == 3

    stored = list(Rollout.objects.filter(run=run).order_by("step", "index"))
    assert [(r.step, r.index) for r in stored] == [(s, i) for s in (1, 2, 3) for i in range(8)]

    # TRL's own completions table, written with log_completions=True, one parquet per logged step.
    for step in (1, 2, 3):
        table = pd.read_parquet(Path(run.run_dir) / "output" / "completions" / f"completions_{step:05d}.parquet")
        rows = [r for r in stored if r.step == step]
        assert len(table) == len(rows) == 8
        assert list(table["completion"]) == [r.completion for r in rows]
        assert list(table["prompt"]) == [r.prompt for r in rows]
        for k, name in enumerate(["digit_ratio", "think_format", "accuracy"]):
            assert [r.rewards[k] for r in rows] == pytest.approx(list(table[name]), abs=1e-6)
        assert [r.advantage for r in rows] == pytest.approx(list(table["advantage"]), abs=1e-6)
        # the group is its own baseline: advantages sum to zero within each group of G=4
        for g in range(2):
            group = [r.advantage for r in rows if r.group == g]
            assert len(group) == 4 and abs(sum(group)) < 1e-4
        for r in rows:
            expected = sum(w * v for w, v in zip([1.0, 0.5, 2.0], r.rewards) if v is not None)
            assert r.reward == pytest.approx(expected)

    metrics = {m.step: m.metrics for m in StepMetric.objects.filter(run=run)}
    assert sorted(metrics) == [1, 2, 3]
    for step in (1, 2, 3):
        rows = [r for r in stored if r.step == step]
        assert metrics[step]["rewards/digit_ratio/mean"] == pytest.approx(
            sum(r.rewards[0] for r in rows) / len(rows), abs=1e-5
        )
        assert "entropy" in metrics[step] and "completions/mean_length" in metrics[step]

    # the reproducibility record the training process reported: the libraries it trained with (as they name their own
    # versions), this checkout's commit, the host, the command and the form's seed
    import torch
    import transformers
    import trl

    record = run.provenance
    assert {k: record["libraries"][k] for k in ("trl", "transformers", "torch")} == {
        "trl": trl.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=settings.BASE_DIR, capture_output=True, text=True)
    assert record["app"]["commit"] == head.stdout.strip() and len(record["app"]["commit"]) == 40
    assert (record["seed"], record["attempt"], record["host"]) == (7, 1, socket.gethostname())
    assert "workers/training/train.py" in record["command"] and record["accelerator"] == {}


def test_a_training_process_that_fails_marks_the_run_failed_with_its_log(
    celery_worker, owner, dataset_version, tiny_model, tmp_path, settings
):
    # a model folder under the demo models' folder, which every user may train from, in the test's process and in
    # the worker's alike (the worker checks the model's access again when the run starts)
    broken = Path(settings.DATA_DIR) / "models" / f"broken-model-{tmp_path.name}"
    shutil.copytree(tiny_model, broken)
    (broken / "model.safetensors").write_bytes(b"not weights")
    try:
        run = _submit(owner, dataset_version, model=str(broken))
        wait_for(lambda: _finished(run), timeout=120, what="the run to fail")
    finally:
        shutil.rmtree(broken, ignore_errors=True)
    assert run.status == Run.Status.FAILED
    assert "Error" in run.error.split(":")[0]  # the exception's type, then its message
    assert "Traceback" in run.log_tail
    assert not Rollout.objects.filter(run=run).exists()
    assert not run.resumable


def test_a_model_path_without_a_model_is_refused_naming_the_field(owner, dataset_version, tmp_path, settings):
    # outside the model roots nothing is said about the folder; inside one, what is wrong with it
    with pytest.raises(RunRefused, match="model: not found or not yours"):
        _submit(owner, dataset_version, model="/nonexistent/model")
    settings.GRPO_MODEL_ROOTS = [tmp_path]
    with pytest.raises(RunRefused, match=f"model: no loadable model at {tmp_path / 'nothing'}"):
        _submit(owner, dataset_version, model=str(tmp_path / "nothing"))
    assert not Run.objects.exists()
