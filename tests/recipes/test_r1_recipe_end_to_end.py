"""The R1 template on the demo data with tiny models and a real worker: SFT -> GRPO -> rejection sampling -> SFT ->
GRPO, each stage fed by the one it names; the Models page's lineage follows it; the last stage's trainer killed
mid-run stops the recipe resumable, and resume finishes it."""

import io
import json
import os
import signal

import pytest

from runs.models import DatasetVersion, RejectionJob, Run
from runs.recipes.services import recipe_from_template, recipe_resume, recipe_start
from runs.registry.selectors import registry
from tests.conftest import wait_for
from tests.lifecycle.test_run_lifecycle import training_pid

pytestmark = [pytest.mark.django_db(transaction=True)]


def _recipe(recipe):
    recipe.refresh_from_db()
    return recipe


def test_the_r1_template_runs_end_to_end_and_resumes_after_a_failed_stage(celery_worker, owner, dataset_version):
    from runs.datasets.services import dataset_import
    from workers.training.coldstart import cold_start_rows

    data = "".join(json.dumps(r) + "\n" for r in cold_start_rows(64)).encode()
    worked = dataset_import(owner=owner, name="worked answers", stream=io.BytesIO(data), source_name="w.jsonl")
    recipe = recipe_from_template(owner=owner, name="R1 demo", template="R1", prompts=dataset_version, sft=worked)
    recipe_start(recipe=recipe)

    # the last stage's trainer dies mid-run
    wait_for(
        lambda: (
            _recipe(recipe).status != "running"
            or recipe.current == 4
            and recipe.outputs[4].get("run")
            and Run.objects.get(pk=recipe.outputs[4]["run"]).step >= 1
        ),
        timeout=900,
        what="the final GRPO stage",
    )
    assert recipe.status == "running", recipe.error
    killed = Run.objects.get(pk=recipe.outputs[4]["run"])
    os.kill(training_pid(killed), signal.SIGKILL)
    wait_for(lambda: _recipe(recipe).status != "running", timeout=120, what="the recipe to stop")
    assert recipe.status == "failed" and recipe.current == 4 and recipe.error.startswith("stage 5 failed")
    recipe_resume(recipe=recipe)
    wait_for(lambda: _recipe(recipe).status != "running", timeout=300, what="the resumed recipe to finish")
    assert recipe.status == "completed", recipe.error

    runs = [Run.objects.get(pk=recipe.outputs[n]["run"]) for n in (0, 1, 3, 4)]
    assert all(r.status == "completed" for r in runs) and runs[3].pk != killed.pk
    final = [str(r.run_dir / "output" / "final") for r in runs]
    # each stage's output feeds the stage that names it
    assert (runs[0].model, runs[0].dataset_version, runs[0].kind) == ("tiny", worked, "sft")
    assert (runs[1].model, runs[1].dataset_version, runs[1].kind) == (final[0], dataset_version, "grpo")
    job = RejectionJob.objects.get(pk=recipe.outputs[2]["job"])
    assert job.model == final[1] and job.output_version_id == recipe.outputs[2]["dataset_version"]
    sampled = DatasetVersion.objects.get(pk=job.output_version_id)
    assert sampled.provenance["model"] == final[1] and sampled.provenance["mixed_in"]["rows"] == 16
    assert (runs[2].model, runs[2].dataset_version, runs[2].kind) == ("tiny", sampled, "sft")
    assert (runs[3].model, runs[3].kind) == (final[2], "grpo") and killed.model == final[2]
    assert recipe.outputs[1]["figures"].get("reward") is not None and "kept_share" in recipe.outputs[2]["figures"]

    # the lineage the Models page shows
    entries = {(e.run.pk if e.run else None, e.key): e for e in registry(owner)}
    assert entries[runs[1].pk, "final"].parent is entries[runs[0].pk, "final"]
    assert entries[runs[0].pk, "final"].parent is entries[None, "tiny"]
    assert entries[runs[3].pk, "final"].parent is entries[runs[2].pk, "final"]
    assert {r.pk for r in entries[runs[2].pk, "final"].used_by} == {killed.pk, runs[3].pk}
