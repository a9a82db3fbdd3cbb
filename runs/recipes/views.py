"""Recipe pages: the list with its templates, a recipe made from a template or a YAML, the recipe page (the pipeline
with each stage's status, links and key figures, and its JSON for the live update), start, cancel, resume, clone with
edits and YAML export."""

from __future__ import annotations

import yaml
from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from runs.access import visible_versions
from runs.datasets.demo import QUICK_START_DATASET, WORKED_ANSWERS_DATASET, form_default, newest_named
from runs.models import Recipe
from runs.recipes.selectors import pipeline, pipeline_json
from runs.recipes.services import (
    TEMPLATES,
    RecipeRefused,
    recipe_cancel,
    recipe_clone,
    recipe_create,
    recipe_from_template,
    recipe_resume,
    recipe_start,
)
from runs.safe_yaml import load_yaml


def _version(versions, value):
    try:
        return versions.filter(pk=int(value)).first()
    except (TypeError, ValueError):
        return None


def owned(request, pk) -> Recipe:
    return get_object_or_404(Recipe.objects.filter(owner=request.user), pk=pk)


def recipe_list(request):
    versions = visible_versions(request.user).select_related("dataset").order_by("-created_at")
    errors = []
    if request.method == "POST":
        try:
            if request.POST.get("yaml"):
                name, stages = _stages_from_yaml(request.POST["yaml"])
                recipe = recipe_create(owner=request.user, name=name or "imported recipe", stages=stages)
            else:
                template = request.POST.get("template", "")
                prompts = _version(versions, request.POST.get("prompts"))
                sft = _version(versions, request.POST.get("sft"))
                if template not in TEMPLATES or prompts is None:
                    raise RecipeRefused(["pick a template and the dataset version of its prompts"])
                recipe = recipe_from_template(
                    owner=request.user,
                    name=request.POST.get("name", "")[:200] or template,
                    template=template,
                    prompts=prompts,
                    sft=sft,
                )
            return redirect(recipe)
        except (RecipeRefused, yaml.YAMLError, RecursionError) as exc:
            errors = getattr(exc, "errors", None) or [f"yaml: not valid YAML ({exc})"]
    return render(
        request,
        "recipes/recipe_list.html",
        {
            "recipes": Recipe.objects.filter(owner=request.user),
            "templates": TEMPLATES,
            "versions": versions,
            # the demo's arithmetic prompts and its worked answers, so that the R1 template works as it comes
            "default_prompts": form_default(versions, request.user, QUICK_START_DATASET),
            "default_sft": newest_named(versions, WORKED_ANSWERS_DATASET),
            "errors": errors,
        },
        status=400 if errors else 200,
    )


def recipe_detail(request, pk):
    recipe = owned(request, pk)
    return render(request, "recipes/recipe_detail.html", {"recipe": recipe, "stages": pipeline(recipe)})


@require_GET
def recipe_pipeline_json(request, pk):
    """The pipeline as the page draws it, for the page's live update (static/js/recipe.js): the figures as data, and
    the drawing itself rendered here, escaped, so the page swaps it in without building HTML from data."""
    recipe = owned(request, pk)
    data = pipeline_json(recipe)
    data["html"] = render_to_string("recipes/pipeline.html", {"stages": data["stages"]}, request=request)
    return JsonResponse(data)


def _stages_from_yaml(text: str) -> tuple[str, list]:
    data = load_yaml(text[: 256 * 1024])
    if not isinstance(data, dict) or not isinstance(data.get("stages"), list):
        raise RecipeRefused(["yaml: give a mapping with name and a list of stages"])
    return str(data.get("name") or "")[:200], data["stages"]


def recipe_clone_view(request, pk):
    """Clone with edits: the recipe's YAML in an editor, changed and saved as a new recipe (a draft whose parent is
    this one)."""
    recipe = owned(request, pk)
    errors = []
    name = request.POST.get("name", "").strip()[:200] if request.method == "POST" else f"{recipe.name} (clone)"
    text = (
        request.POST.get("yaml", "")
        if request.method == "POST"
        else yaml.safe_dump({"stages": recipe.stages}, sort_keys=False, allow_unicode=True)
    )
    if request.method == "POST":
        try:
            _, stages = _stages_from_yaml(text)
            return redirect(recipe_clone(recipe=recipe, name=name, stages=stages))
        except (RecipeRefused, yaml.YAMLError, RecursionError) as exc:
            errors = getattr(exc, "errors", None) or [f"yaml: not valid YAML ({exc})"]
    return render(
        request,
        "recipes/recipe_clone.html",
        {"recipe": recipe, "name": name, "yaml": text, "errors": errors},
        status=400 if errors else 200,
    )


@require_POST
def recipe_action(request, pk, action):
    recipe = owned(request, pk)
    try:
        if action == "start":
            recipe_start(recipe=recipe)
        elif action == "cancel":
            recipe_cancel(recipe=recipe)
        elif action == "resume":
            recipe_resume(recipe=recipe)
    except RecipeRefused as exc:
        messages.error(request, "; ".join(exc.errors))
    return redirect(recipe)


@require_GET
def recipe_yaml(request, pk):
    recipe = owned(request, pk)
    response = HttpResponse(
        yaml.safe_dump({"name": recipe.name, "stages": recipe.stages}, sort_keys=False),
        content_type="application/yaml; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="recipe-{recipe.pk}.yaml"'
    return response
