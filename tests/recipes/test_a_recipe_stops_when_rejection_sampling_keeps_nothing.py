"""A rejection-sampling stage that keeps no sample stops its recipe and says why: the stages after it would train on
the mixed-in rows alone (the R1 template once "completed" green with 0 of 96 samples kept)."""

import pytest

from runs.models import RejectionJob, Run
from runs.recipes.services import recipe_advance, recipe_create, recipe_start
from runs.sampling.services import rejection_job_store

pytestmark = pytest.mark.django_db


def _wrong(p, s):
    return {
        "prompt_index": p,
        "sample": s,
        "prompt": f"What is {p} + {p}?",
        "completion": "\\boxed{7}",
        "rewards": [0.0],
        "reward": 0.0,
        "correct": False,
        "length": 3,
        "truncated": False,
        "columns": {"answer": str(2 * p)},
    }


def test_a_stage_that_keeps_no_sample_fails_the_recipe_naming_why(owner, dataset_version, sft_version, tiny_model):
    recipe = recipe_create(
        owner=owner,
        name="r1",
        stages=[
            {
                "kind": "rejection_sample",
                "name": "rejection sampling",
                "model": "tiny",
                "dataset": dataset_version.pk,
                "rewards": ["accuracy"],
                "settings": {"k": 4, "threshold": 1.0, "solved_by": "accuracy", "max_prompts": 3, "mix_rows": 16},
                "mix": sft_version.pk,
            },
            {"kind": "sft", "name": "second SFT", "model": "tiny", "dataset": "stage:1"},
        ],
    )
    recipe_start(recipe=recipe)
    recipe.refresh_from_db()
    job = RejectionJob.objects.get(pk=recipe.outputs[0]["job"])
    event = {"k": 4, "solved_by": "accuracy", "threshold": 1.0, "prompts": 3, "seconds": 1.0}
    rejection_job_store(job=job, event={**event, "rows": [_wrong(p, s) for p in range(3) for s in range(4)]})
    job.refresh_from_db()
    assert (job.status, job.stats["kept"], job.stats["mixed_in"]) == ("completed", 0, 16)

    recipe = recipe_advance(recipe_id=recipe.pk)

    assert recipe.status == "failed" and recipe.current == 0
    assert recipe.error == (
        "stage 1 failed: rejection sampling kept 0 of 12 samples: none reached accuracy ≥ 1, so its dataset holds "
        "only the 16 mixed-in rows. Lower the threshold, sample more (k), or train the model before it longer, "
        "then resume"
    )
    assert recipe.outputs[0]["status"] == "failed" and recipe.outputs[0]["figures"]["kept"] == 0
    assert not Run.objects.filter(owner=owner).exists()  # the SFT on nothing sampled never starts
