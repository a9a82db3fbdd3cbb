"""The JSON API over recipes: list, make (from a template or stages), read, start, cancel, resume (grpo_web/api.py
mounts this router at /api/)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from ninja import Router, Schema, Status
from pydantic import Field

from runs.access import visible_versions
from runs.apischemas import Errors
from runs.models import Recipe
from runs.recipes.selectors import pipeline
from runs.recipes.services import (
    TEMPLATES,
    RecipeRefused,
    recipe_cancel,
    recipe_create,
    recipe_from_template,
    recipe_resume,
    recipe_start,
)

router = Router()


class RecipeIn(Schema):
    name: str = Field("", max_length=200)
    template: str | None = Field(None, description="R1, R1-Zero or distill; or give stages.")
    prompts: int | None = Field(None, description="A template's dataset version of prompts.")
    sft: int | None = Field(None, description="A template's dataset version of worked answers (completion column).")
    stages: list[dict] | None = Field(
        None,
        description="[{kind, name, model, dataset, rewards, config, settings}]; "
        "model/dataset may name an earlier stage as 'stage:N'.",
    )


def _recipe(recipe) -> dict:
    return {
        "id": recipe.pk,
        "name": recipe.name,
        "status": recipe.status,
        "current_stage": recipe.current + 1,
        "error": recipe.error,
        "stages": recipe.stages,
        "pipeline": pipeline(recipe),
        "parent": recipe.parent_id,
        "url": recipe.get_absolute_url(),
    }


def _owned_recipe(request, recipe_id):
    return get_object_or_404(Recipe.objects.filter(owner=request.user), pk=recipe_id)


@router.get("/recipes", response=list[dict], tags=["recipes"], summary="Your recipes")
def recipes_list(request):
    return [_recipe(r) for r in Recipe.objects.filter(owner=request.user)]


@router.post(
    "/recipes",
    response={201: dict, 400: Errors},
    tags=["recipes"],
    summary="Make a recipe (a draft) from a template or from stages",
)
def recipe_make(request, body: RecipeIn):
    try:
        if body.stages is not None:
            recipe = recipe_create(owner=request.user, name=body.name or "recipe", stages=body.stages)
        else:
            versions = visible_versions(request.user)
            prompts = versions.filter(pk=body.prompts).first() if body.prompts is not None else None
            sft = versions.filter(pk=body.sft).first() if body.sft is not None else None
            if body.template not in TEMPLATES or prompts is None:
                return Status(
                    400,
                    {"errors": [f"template: one of {', '.join(TEMPLATES)}, with prompts: a dataset version of yours"]},
                )
            recipe = recipe_from_template(
                owner=request.user, name=body.name or body.template, template=body.template, prompts=prompts, sft=sft
            )
    except RecipeRefused as exc:
        return Status(400, {"errors": exc.errors})
    return Status(201, _recipe(recipe))


@router.get("/recipes/{int:recipe_id}", response=dict, tags=["recipes"])
def recipe_get(request, recipe_id: int):
    return _recipe(_owned_recipe(request, recipe_id))


@router.post(
    "/recipes/{int:recipe_id}/{action}",
    response={200: dict, 400: Errors},
    tags=["recipes"],
    summary="start, cancel or resume (from the failed stage) a recipe",
)
def recipe_act(request, recipe_id: int, action: str):
    recipe = _owned_recipe(request, recipe_id)
    actions = {"start": recipe_start, "cancel": recipe_cancel, "resume": recipe_resume}
    if action not in actions:
        return Status(400, {"errors": ["action: start, cancel or resume"]})
    try:
        actions[action](recipe=recipe)
    except RecipeRefused as exc:
        return Status(400, {"errors": exc.errors})
    recipe.refresh_from_db()
    return Status(200, _recipe(recipe))
