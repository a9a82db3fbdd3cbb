"""Recipes: stage inputs must name earlier outputs; a completed stage starts the next with its outputs; a failed stage
stops the recipe, resumable from there; YAML both ways; the owner alone sees a recipe."""

import shutil

import pytest
import yaml
from django.urls import reverse

from runs.models import Evaluation, Recipe, RejectionJob, Run
from runs.recipes.services import (
    TEMPLATES,
    RecipeRefused,
    recipe_advance,
    recipe_cancel,
    recipe_create,
    recipe_from_template,
    recipe_problems,
    recipe_resume,
    recipe_start,
)

pytestmark = pytest.mark.django_db


def _finish_run(pk, status=Run.Status.COMPLETED):
    Run.objects.filter(pk=pk).update(status=status, error="boom" if status == Run.Status.FAILED else "")


def test_every_template_is_a_valid_recipe(owner, dataset_version, sft_version):
    for name in TEMPLATES:
        recipe = recipe_from_template(owner=owner, name=name, template=name, prompts=dataset_version, sft=sft_version)
        assert recipe.status == "draft" and len(recipe.outputs) == len(recipe.stages)
    assert [s["kind"] for s in TEMPLATES["R1"]] == ["sft", "grpo", "rejection_sample", "sft", "grpo"]


def test_an_input_must_name_an_earlier_stage_that_makes_it(owner, dataset_version):
    errors = recipe_problems(
        [
            {"kind": "sft", "model": "stage:2", "dataset": dataset_version.pk},
            {"kind": "grpo", "model": "tiny", "dataset": "stage:1"},
            {"kind": "bake"},
        ],
        owner,
    )
    assert errors == [
        "stage 1: model names stage 2, which does not come before it",
        "stage 2: dataset names stage 1 (sft), which makes no dataset",
        "stage 3: kind must be one of sft, grpo, rejection_sample, eval",
    ]


def test_each_stage_feeds_the_next(owner, dataset_version, sft_version, tiny_model, coldstart_model):
    recipe = recipe_from_template(
        owner=owner, name="distill", template="distill", prompts=dataset_version, sft=sft_version
    )
    recipe_start(recipe=recipe)
    recipe.refresh_from_db()
    assert "job" in recipe.outputs[0], (recipe.status, recipe.error, recipe.outputs)
    job = RejectionJob.objects.get(pk=recipe.outputs[0]["job"])
    assert job.model == "tiny-sft" and job.dataset_version == dataset_version and job.mix_version == sft_version
    assert recipe_advance(recipe_id=recipe.pk).current == 0  # still running: nothing moves
    RejectionJob.objects.filter(pk=job.pk).update(
        status="completed", output_version=sft_version, stats={"kept": 3, "kept_share": 0.25, "mixed_in": 16}
    )
    recipe = recipe_advance(recipe_id=recipe.pk)
    assert recipe.current == 1 and recipe.outputs[0]["dataset_version"] == sft_version.pk
    assert recipe.outputs[0]["figures"]["kept_share"] == 0.25
    run = Run.objects.get(pk=recipe.outputs[1]["run"])
    assert (run.kind, run.model, run.dataset_version) == ("sft", "tiny", sft_version)
    _finish_run(run.pk)
    recipe = recipe_advance(recipe_id=recipe.pk)
    assert recipe.status == "completed" and recipe.outputs[1]["model"] == str(run.run_dir / "output" / "final")


def test_a_failed_stage_stops_the_recipe_and_resume_starts_it_again(owner, dataset_version, tiny_model):
    recipe = recipe_from_template(owner=owner, name="zero", template="R1-Zero", prompts=dataset_version)
    recipe_start(recipe=recipe)
    recipe.refresh_from_db()
    first = recipe.outputs[0]["run"]
    _finish_run(first, Run.Status.FAILED)
    recipe = recipe_advance(recipe_id=recipe.pk)
    assert recipe.status == "failed" and recipe.error == "stage 1 failed: boom"
    with pytest.raises(RecipeRefused):
        recipe_start(recipe=recipe)
    recipe_resume(recipe=recipe)
    recipe.refresh_from_db()
    assert recipe.status == "running" and recipe.outputs[0]["run"] != first
    _finish_run(recipe.outputs[0]["run"])
    assert recipe_advance(recipe_id=recipe.pk).status == "completed"


def test_a_recipe_exports_and_imports_as_yaml(owner_client, owner, dataset_version, sft_version):
    recipe = recipe_from_template(
        owner=owner, name="distill", template="distill", prompts=dataset_version, sft=sft_version
    )
    text = owner_client.get(reverse("recipe_yaml", args=[recipe.pk])).content.decode()
    assert yaml.safe_load(text) == {"name": "distill", "stages": recipe.stages}
    response = owner_client.post(reverse("recipes"), {"yaml": text.replace("name: distill", "name: again", 1)})
    assert response.status_code == 302
    assert Recipe.objects.get(name="again").stages == recipe.stages
    bad = owner_client.post(reverse("recipes"), {"yaml": "name: x\nstages:\n- {kind: grpo, model: stage:3}\n"})
    assert bad.status_code == 400 and "stage 1: model names stage 3" in bad.content.decode()


def test_the_recipe_page_draws_the_pipeline(owner_client, owner, dataset_version, sft_version):
    recipe = recipe_from_template(owner=owner, name="r1", template="R1", prompts=dataset_version, sft=sft_version)
    page = owner_client.get(recipe.get_absolute_url()).content.decode()
    assert page.count('class="stage waiting"') == 5 and 'id="recipe-start"' in page
    assert page.count('<svg class="arrow"') == 4  # an arrow into every stage but the first
    assert "output of stage 2" in page and 'src="/static/js/recipe.js"' not in page  # a draft does not poll


def test_the_pipeline_json_has_each_stages_status_links_and_key_figures(
    owner_client, owner, dataset_version, sft_version, tiny_model, coldstart_model
):
    recipe = recipe_from_template(
        owner=owner, name="distill", template="distill", prompts=dataset_version, sft=sft_version
    )
    recipe_start(recipe=recipe)
    recipe.refresh_from_db()
    job = recipe.outputs[0]["job"]
    RejectionJob.objects.filter(pk=job).update(
        status="completed", output_version=sft_version, stats={"kept": 3, "kept_share": 0.25, "mixed_in": 16}
    )
    recipe = recipe_advance(recipe_id=recipe.pk)
    data = owner_client.get(reverse("recipe_pipeline_json", args=[recipe.pk])).json()
    assert (data["status"], data["current"]) == ("running", 2)
    first, second = data["stages"]
    assert first["status"] == "completed" and second["status"] == "queued" or second["status"] == "running"
    assert [(f["label"], f["value"]) for f in first["figures"]] == [("kept share", 0.25), ("kept", 3), ("mixed in", 16)]
    links = {link["label"]: link["url"] for link in first["links"]}
    assert links["sampling job"] == reverse("rejection_job_detail", args=[job])
    assert links["dataset"] == reverse("dataset_version", args=[sft_version.dataset_id, sft_version.number])
    assert second["model"] == "tiny" and second["dataset"] == "output of stage 1"
    assert {link["label"] for link in second["links"]} == {"run"}  # no model yet: the run has not finished
    assert 'data-figure="kept_share"' in data["html"] and "0.250" in data["html"]
    page = owner_client.get(recipe.get_absolute_url()).content.decode()
    assert 'src="/static/js/recipe.js"' in page  # a running recipe's page follows it


def test_clone_with_edits_opens_the_recipe_as_yaml_and_saves_the_edited_copy(owner_client, owner, dataset_version):
    recipe = recipe_from_template(owner=owner, name="zero", template="R1-Zero", prompts=dataset_version)
    form = owner_client.get(reverse("recipe_clone", args=[recipe.pk]))
    text = form.context["yaml"]
    assert form.status_code == 200 and yaml.safe_load(text) == {"stages": recipe.stages}
    assert 'value="zero (clone)"' in form.content.decode()
    edited = yaml.safe_load(text)
    edited["stages"][0]["config"]["max_steps"] = 3
    edited["stages"].append(
        {"kind": "eval", "name": "held out", "model": "stage:1", "dataset": dataset_version.pk, "split": "all"}
    )
    response = owner_client.post(
        reverse("recipe_clone", args=[recipe.pk]), {"name": "zero, shorter", "yaml": yaml.safe_dump(edited)}
    )
    clone = Recipe.objects.get(parent=recipe)
    assert response.status_code == 302 and response["Location"] == clone.get_absolute_url()
    assert (clone.name, clone.status, len(clone.outputs)) == ("zero, shorter", "draft", 2)
    assert clone.stages[0]["config"]["max_steps"] == 3 and clone.stages[1]["kind"] == "eval"
    assert recipe.stages[0]["config"]["max_steps"] == 8  # the original is unchanged

    bad = owner_client.post(
        reverse("recipe_clone", args=[recipe.pk]),
        {"name": "x", "yaml": "stages:\n- {kind: sft, model: stage:2, dataset: 1}\n"},
    )
    assert bad.status_code == 400 and "stage 1: model names stage 2" in bad.content.decode()
    assert "stage:2" in bad.content.decode()  # the editor keeps what was typed
    broken = owner_client.post(reverse("recipe_clone", args=[recipe.pk]), {"name": "x", "yaml": "stages: [\n"})
    assert broken.status_code == 400 and "not valid YAML" in broken.content.decode()
    assert Recipe.objects.filter(parent=recipe).count() == 1


def test_cancel_stops_a_queued_sampling_job_or_evaluation_stage(
    owner, dataset_version, sft_version, tiny_model, coldstart_model
):
    recipe = recipe_from_template(
        owner=owner, name="distill", template="distill", prompts=dataset_version, sft=sft_version
    )
    recipe_start(recipe=recipe)
    recipe_cancel(recipe=recipe)
    recipe.refresh_from_db()
    job = RejectionJob.objects.get(pk=recipe.outputs[0]["job"])
    assert recipe.status == "cancelled" and job.status == "cancelled" and recipe.outputs[0]["status"] == "cancelled"

    source = recipe_create(
        owner=owner,
        name="eval",
        stages=[
            {
                "kind": "sft",
                "model": "tiny",
                "dataset": sft_version.pk,
                "rewards": ["accuracy"],
                "config": TEMPLATES["distill"][1]["config"],
            },
            {"kind": "eval", "model": "stage:1", "dataset": dataset_version.pk, "split": "all"},
        ],
    )
    recipe_start(recipe=source)
    source.refresh_from_db()
    trained = Run.objects.get(pk=source.outputs[0]["run"])
    shutil.copytree(tiny_model, trained.run_dir / "output" / "final")  # what the SFT run would have saved
    _finish_run(trained.pk)
    source = recipe_advance(recipe_id=source.pk)
    evaluation = Evaluation.objects.get(pk=source.outputs[1]["evaluation"])
    assert evaluation.status == "queued"
    recipe_cancel(recipe=source)
    evaluation.refresh_from_db()
    assert evaluation.status == "cancelled"


def test_an_outsider_gets_404_for_a_recipe(outsider_client, owner, dataset_version):
    recipe = recipe_create(
        owner=owner,
        name="mine",
        stages=[{"kind": "grpo", "model": "tiny", "dataset": dataset_version.pk, "rewards": ["digit_ratio"]}],
    )
    assert outsider_client.get(recipe.get_absolute_url()).status_code == 404
    assert outsider_client.get(reverse("recipe_yaml", args=[recipe.pk])).status_code == 404
    assert outsider_client.post(reverse("recipe_action", args=[recipe.pk, "start"])).status_code == 404
    assert outsider_client.get(reverse("recipe_pipeline_json", args=[recipe.pk])).status_code == 404
    assert outsider_client.get(reverse("recipe_clone", args=[recipe.pk])).status_code == 404
    assert outsider_client.post(reverse("recipe_clone", args=[recipe.pk]), {"yaml": "stages: []"}).status_code == 404
    with pytest.raises(RecipeRefused, match="no dataset version"):
        from django.contrib.auth import get_user_model

        recipe_create(
            owner=get_user_model().objects.get(username="outsider"),
            name="x",
            stages=[{"kind": "grpo", "model": "tiny", "dataset": dataset_version.pk}],
        )
