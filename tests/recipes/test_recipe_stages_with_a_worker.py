"""Recipe stages run by a real Celery worker: an eval stage evaluates the model an earlier stage made, and its figures
reach the pipeline; cancelling a recipe while its rejection-sampling stage samples stops the sampling process."""

import io
import json
import os

import pytest
from django.urls import reverse
from grpo_web_protocol.config import SFT_FIELDS

from runs.models import Evaluation, RejectionJob, RejectionSample, Run
from runs.recipes.selectors import pipeline
from runs.recipes.services import recipe_cancel, recipe_create, recipe_start
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


def _recipe(recipe):
    recipe.refresh_from_db()
    return recipe


@pytest.fixture
def worked(owner):
    from runs.datasets.services import dataset_import
    from workers.training.coldstart import cold_start_rows

    data = "".join(json.dumps(r) + "\n" for r in cold_start_rows(32)).encode()
    return dataset_import(owner=owner, name="worked answers", stream=io.BytesIO(data), source_name="w.jsonl")


def test_an_eval_stage_evaluates_the_model_an_earlier_stage_made(
    celery_worker, owner, owner_client, dataset_version, worked
):
    sft = {k: f.default for k, f in SFT_FIELDS.items()} | {
        "max_steps": 3,
        "per_device_train_batch_size": 8,
        "save_steps": 0,
    }
    recipe = recipe_create(
        owner=owner,
        name="sft then eval",
        stages=[
            {
                "kind": "sft",
                "name": "cold start",
                "model": "tiny",
                "dataset": worked.pk,
                "rewards": ["accuracy"],
                "config": sft,
            },
            {
                "kind": "eval",
                "name": "held out",
                "model": "stage:1",
                "dataset": dataset_version.pk,
                "split": "all",
                "settings": {"eval_num_samples": 3, "eval_max_prompts": 6},
            },
        ],
    )
    recipe_start(recipe=recipe)
    wait_for(lambda: _recipe(recipe).status != "running", timeout=300, what="the recipe to finish")
    assert recipe.status == "completed", recipe.error

    run = Run.objects.get(pk=recipe.outputs[0]["run"])
    evaluation = Evaluation.objects.get(pk=recipe.outputs[1]["evaluation"])
    assert (evaluation.status, evaluation.kind, evaluation.run_id) == ("completed", "standalone", run.pk)
    assert evaluation.model == str(run.run_dir / "output" / "final") == recipe.outputs[0]["model"]
    assert (evaluation.dataset_version, evaluation.split, evaluation.k, evaluation.prompts) == (
        dataset_version,
        "all",
        3,
        6,
    )
    assert evaluation.samples.count() == 6 * (3 + 1)  # k samples and one greedy per prompt
    assert 0.0 <= evaluation.metrics["mean@k"] <= evaluation.metrics["pass@k"] <= 1.0

    # the pipeline's figures are the evaluation's, and its links open the run, the model and the evaluation
    assert recipe.outputs[1]["figures"] == evaluation.metrics
    first, second = pipeline(recipe)
    assert [f["key"] for f in second["figures"]] == ["mean@k", "pass@k", "maj@k"]
    assert second["figures"][0]["value"] == evaluation.metrics["mean@k"]
    assert first["figures"] and first["figures"][0]["label"] == "final loss"
    links = {link["label"]: link["url"] for stage in (first, second) for link in stage["links"]}
    assert links["evaluation"] == reverse("evaluation_detail", args=[run.pk, evaluation.pk])
    assert links["download"] == reverse("model_download", args=[run.pk, "final"])
    assert owner_client.get(links["evaluation"]).status_code == 200
    page = owner_client.get(recipe.get_absolute_url()).content.decode()
    assert page.count('class="stage completed"') == 2 and 'data-figure="mean@k"' in page


def _sampling_pid(job) -> int | None:
    """The sampling program of this job, found by its config file on the command line."""
    needle = str(job.job_dir / "sample_config.json").encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if needle in fh.read():
                    return int(pid)
        except OSError:
            continue
    return None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_cancelling_a_recipe_stops_its_running_sampling_job(celery_worker, owner, dataset_version):
    recipe = recipe_create(
        owner=owner,
        name="long sampling",
        stages=[
            {
                "kind": "rejection_sample",
                "name": "sample a lot",
                "model": "tiny",
                "dataset": dataset_version.pk,
                "rewards": ["accuracy"],
                # far more than the test waits for: it runs until cancelled
                "settings": {"k": 64, "max_prompts": 64, "max_new_tokens": 512, "threshold": 1.0},
            },
        ],
    )
    recipe_start(recipe=recipe)
    job = RejectionJob.objects.get(pk=_recipe(recipe).outputs[0]["job"])
    started = job.job_dir / "events.jsonl"
    wait_for(
        lambda: started.is_file() and '"started"' in started.read_text(),
        timeout=120,
        what="the sampling program to load its model and start sampling",
    )
    pid = _sampling_pid(job)
    assert pid and _alive(pid)

    recipe_cancel(recipe=recipe)
    wait_for(lambda: not _alive(pid), timeout=30, what="the sampling process to stop")
    job.refresh_from_db()
    assert (job.status, job.output_version, job.error) == ("cancelled", None, "")
    assert not RejectionSample.objects.filter(job=job).exists()
    assert _recipe(recipe).status == "cancelled" and recipe.outputs[0]["status"] == "cancelled"
    assert '"eval"' not in started.read_text()  # stopped mid-sampling, not after
