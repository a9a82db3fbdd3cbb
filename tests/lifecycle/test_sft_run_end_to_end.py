"""An SFT run trained by a real Celery worker: its curves, checkpoints and final model stored; cancelled and resumed
from its checkpoint; evaluated on the eval split by the rewards it names."""

import dataclasses
import io
import json
from pathlib import Path

import pytest
from grpo_web_protocol.config import SFT_FIELDS

from rewards.models import RewardFunction
from runs.lifecycle.services import run_cancel, run_create, run_resume
from runs.lifecycle.spec import RunSpec
from runs.models import Evaluation, Rollout, Run, StepMetric
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def sft_version(owner):
    from runs.datasets.mapping import Mapping
    from runs.datasets.services import dataset_import, dataset_version_map
    from workers.training.coldstart import cold_start_rows

    rows = [{**r, "answer": r["completion"].rsplit("{", 1)[1].rstrip("}")} for r in cold_start_rows(48)]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    version = dataset_import(owner=owner, name="worked answers", stream=io.BytesIO(data), source_name="sft.jsonl")
    return dataset_version_map(
        version=version,
        mapping=dataclasses.replace(Mapping.of(version), split="fraction", eval_fraction=0.25, split_seed=3),
    )


def _submit(owner, version, rewards=(), evaluation=None, **config):
    base = {k: f.default for k, f in SFT_FIELDS.items()}
    return run_create(
        owner=owner,
        spec=RunSpec(
            name="sft e2e",
            model="tiny",
            dataset_version=version,
            kind="sft",
            rewards=[
                {
                    "name": n,
                    "weight": 1.0,
                    "version_id": RewardFunction.objects.get(owner=owner, name=n).latest_version.pk,
                }
                for n in rewards
            ],
            config={**base, **config},
            # an SFT run's evaluations sample up to GRPO's max_completion_length, unless told: in the worker's
            # process that is TRL's 512 (the session's small defaults stay in this one)
            evaluation={"eval_max_new_tokens": 16, **evaluation} if evaluation else evaluation,
        ),
    )


def _finished(run):
    run.refresh_from_db()
    return run.is_finished


def test_an_sft_run_trains_on_a_worker_with_its_curves_and_evaluations(celery_worker, owner, sft_version):
    run = _submit(
        owner,
        sft_version,
        rewards=["accuracy"],
        evaluation={"eval_steps": 4, "eval_num_samples": 2, "eval_max_prompts": 4},
        max_steps=4,
        save_steps=2,
        per_device_train_batch_size=8,
    )
    wait_for(lambda: _finished(run), timeout=240, what="the SFT run to finish")
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail
    assert (run.step, run.checkpoint_step) == (4, 4)
    metrics = {m.step: m.metrics for m in StepMetric.objects.filter(run=run)}
    assert all({"loss", "mean_token_accuracy", "learning_rate"} <= set(metrics[s]) for s in (1, 2, 3, 4))
    assert not Rollout.objects.filter(run=run).exists()
    assert (Path(run.run_dir) / "output" / "final" / "model.safetensors").exists()
    # periodic evaluations of the base model (step 0) and the last step, scored by the run's reward
    periodic = Evaluation.objects.filter(run=run, kind="periodic").order_by("step")
    assert [e.step for e in periodic] == [0, 4]
    assert [(e.status, e.prompts, e.k, e.solved_by) for e in periodic] == [("completed", 4, 2, "accuracy")] * 2
    assert all(e.samples.count() == 4 * 3 for e in periodic)  # k samples and one greedy per prompt


def test_a_cancelled_sft_run_resumes_from_its_checkpoint(celery_worker, owner, sft_version):
    run = _submit(owner, sft_version, max_steps=400, save_steps=2, per_device_train_batch_size=4)
    wait_for(lambda: (run.refresh_from_db(), run.checkpoint_step >= 2)[1], timeout=240, what="a first checkpoint")
    run_cancel(run=run)
    wait_for(lambda: _finished(run), timeout=60, what="the cancel to land")
    assert run.status == Run.Status.CANCELLED and run.resumable
    stopped_at = run.checkpoint_step
    Run.objects.filter(pk=run.pk).update(total_steps=stopped_at + 2, config={**run.config, "max_steps": stopped_at + 2})
    run.refresh_from_db()
    run_resume(run=run)
    wait_for(lambda: _finished(run), timeout=240, what="the resumed run to finish")
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail
    assert run.attempt == 2 and run.step == stopped_at + 2
    assert sorted(StepMetric.objects.filter(run=run, metrics__has_key="loss").values_list("step", flat=True)) == list(
        range(1, stopped_at + 3)
    )
