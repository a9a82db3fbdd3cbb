"""The JSON API over reward functions and their versions (grpo_web/api.py mounts it at /api/). Same rules as the
editor: code is checked (it parses, the entrypoint exists) before it is saved, never run here; the sandbox runs it."""

from __future__ import annotations

from django.db import IntegrityError
from django.shortcuts import get_object_or_404
from ninja import Router, Schema, Status
from pydantic import Field

from grpo_web.removal import delete_answer
from rewards.forms import RewardEditForm, RewardNewForm
from rewards.library import source as library_source
from rewards.models import RewardFunction
from rewards.services import RewardCodeError, docstring, reward_create, reward_function_delete, reward_save

router = Router(tags=["rewards"])


class Errors(Schema):
    errors: list[str]


class RewardVersionOut(Schema):
    number: int
    entrypoint: str
    source: str
    created_at: str


class RewardOut(Schema):
    id: int
    name: str
    owner: str
    shared: bool
    description: str
    template: str
    latest_version: int | None
    url: str


class RewardDetail(RewardOut):
    latest: RewardVersionOut | None
    versions: list[int] = Field(description="Every version number, newest first.")


class RewardIn(Schema):
    name: str = Field(description="Letters, digits, - and _; TRL logs it as rewards/<name>/mean.")
    source: str | None = Field(None, description="The code; leave out to start from template.")
    entrypoint: str | None = Field(None, description="The function TRL calls (the template's name by default).")
    description: str = ""
    template: str = Field("", description="A built-in to start from (accuracy, think_format, ...).")


class RewardVersionIn(Schema):
    source: str
    entrypoint: str
    description: str | None = None


def _version(v) -> dict:
    return {"number": v.number, "entrypoint": v.entrypoint, "source": v.source, "created_at": v.created_at.isoformat()}


def _reward(rf: RewardFunction, user) -> dict:
    numbers = sorted((v.number for v in rf.versions.all()), reverse=True)
    return {
        "id": rf.pk,
        "name": rf.name,
        "owner": rf.owner.username,
        "shared": rf.owner_id != user.pk,
        "description": rf.description,
        "template": rf.template,
        "latest_version": numbers[0] if numbers else None,
        "url": rf.get_absolute_url(),
    }


def _detail(rf: RewardFunction, user) -> dict:
    latest = rf.latest_version
    return {
        **_reward(rf, user),
        "latest": _version(latest) if latest else None,
        "versions": sorted((v.number for v in rf.versions.all()), reverse=True),
    }


def _form_errors(form) -> list[str]:
    return [f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in form.errors.items()]


@router.get("/rewards", response=list[RewardOut], summary="Reward functions you own or that are shared with you")
def rewards_list(request):
    qs = RewardFunction.objects.visible_to(request.user).select_related("owner").prefetch_related("versions")
    return [_reward(rf, request.user) for rf in qs[:1000]]


@router.get("/rewards/{int:reward_id}", response=RewardDetail)
def reward_get(request, reward_id: int):
    return _detail(get_object_or_404(RewardFunction.objects.visible_to(request.user), pk=reward_id), request.user)


@router.get("/rewards/{int:reward_id}/versions/{int:number}", response=RewardVersionOut)
def reward_version_get(request, reward_id: int, number: int):
    rf = get_object_or_404(RewardFunction.objects.visible_to(request.user), pk=reward_id)
    return _version(get_object_or_404(rf.versions, number=number))


@router.post("/rewards", response={201: RewardDetail, 400: Errors}, summary="A new reward function (version 1)")
def reward_new(request, body: RewardIn):
    form = RewardNewForm({"name": body.name, "template": body.template})
    if not form.is_valid():
        return Status(400, {"errors": _form_errors(form)})
    name, template = form.cleaned_data["name"], form.cleaned_data["template"]
    if body.source is None and not template:
        return Status(400, {"errors": ["source: give the code, or a template to start from"]})
    source = body.source if body.source is not None else library_source(template)
    entrypoint = (body.entrypoint or template or "").strip()
    if RewardFunction.objects.filter(owner=request.user, name=name).exists():
        return Status(400, {"errors": [f"name: you already have a reward function named {name!r}"]})
    try:
        rf = reward_create(
            owner=request.user,
            name=name,
            source_code=source,
            entrypoint=entrypoint,
            description=body.description or (docstring(source, entrypoint) if template else ""),
            template=template,
        )
    except RewardCodeError as exc:
        return Status(400, {"errors": [f"source: {exc}"]})
    except IntegrityError:  # the same name saved at the same moment by another request
        return Status(400, {"errors": [f"name: you already have a reward function named {name!r}"]})
    return Status(201, _detail(rf, request.user))


@router.post(
    "/rewards/{int:reward_id}/versions",
    response={200: RewardDetail, 201: RewardDetail, 400: Errors},
    summary="Save code as the next version (200 and no new version when nothing changed)",
)
def reward_version_new(request, reward_id: int, body: RewardVersionIn):
    rf = get_object_or_404(RewardFunction.objects.visible_to(request.user, write=True), pk=reward_id)
    form = RewardEditForm(
        {
            "source": body.source,
            "entrypoint": body.entrypoint,
            "description": rf.description if body.description is None else body.description,
        }
    )
    if not form.is_valid():
        return Status(400, {"errors": _form_errors(form)})
    try:
        _, created = reward_save(
            function=rf,
            source_code=form.cleaned_data["source"],
            entrypoint=form.cleaned_data["entrypoint"],
            description=form.cleaned_data["description"],
        )
    except RewardCodeError as exc:
        return Status(400, {"errors": [f"source: {exc}"]})
    return Status(201 if created else 200, _detail(rf, request.user))


@router.delete(
    "/rewards/{int:reward_id}",
    response={204: None, 409: Errors},
    summary="Delete a reward function of yours with its versions (409: the runs and jobs that pin it)",
)
def reward_delete_api(request, reward_id: int):
    function = get_object_or_404(RewardFunction, pk=reward_id, owner=request.user)
    return delete_answer(lambda: reward_function_delete(function=function, user=request.user))
