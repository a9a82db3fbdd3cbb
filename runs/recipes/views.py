"""Recipe pages: the list with its templates, a recipe made from a template or a YAML, the recipe page (the pipeline
with each stage's status, links and key figures), start, cancel, resume, clone and YAML export."""

from __future__ import annotations

import yaml
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from runs.access import visible_versions
from runs.models import Recipe
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
                data = yaml.safe_load(request.POST["yaml"][:256 * 1024])
                if not isinstance(data, dict) or not isinstance(data.get("stages"), list):
                    raise RecipeRefused(["yaml: give a mapping with name and a list of stages"])
                recipe = recipe_create(owner=request.user, name=str(data.get("name") or "imported recipe")[:200],
                                       stages=data["stages"])
            else:
                template = request.POST.get("template", "")
                prompts = _version(versions, request.POST.get("prompts"))
                sft = _version(versions, request.POST.get("sft"))
                if template not in TEMPLATES or prompts is None:
                    raise RecipeRefused(["pick a template and the dataset version of its prompts"])
                recipe = recipe_from_template(owner=request.user, name=request.POST.get("name", "")[:200] or template,
                                              template=template, prompts=prompts, sft=sft)
            return redirect(recipe)
        except (RecipeRefused, yaml.YAMLError, RecursionError) as exc:
            errors = getattr(exc, "errors", None) or [f"yaml: not valid YAML ({exc})"]
    return render(request, "recipes/recipe_list.html", {
        "recipes": Recipe.objects.filter(owner=request.user), "templates": TEMPLATES, "versions": versions,
        "errors": errors}, status=400 if errors else 200)


def recipe_detail(request, pk):
    from runs.recipes.selectors import pipeline

    recipe = owned(request, pk)
    return render(request, "recipes/recipe_detail.html", {"recipe": recipe, "stages": pipeline(recipe)})


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
        elif action == "clone":
            return redirect(recipe_clone(recipe=recipe))
    except RecipeRefused as exc:
        messages.error(request, "; ".join(exc.errors))
    return redirect(recipe)


@require_GET
def recipe_yaml(request, pk):
    recipe = owned(request, pk)
    response = HttpResponse(yaml.safe_dump({"name": recipe.name, "stages": recipe.stages}, sort_keys=False),
                            content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="recipe-{recipe.pk}.yaml"'
    return response
