"""Writes for reward functions. Keyword-only, <entity>_<action>."""

from __future__ import annotations

import ast
from collections.abc import Callable

from django.db import transaction
from django.db.models import Max

from grpo_web.removal import Removal, counted
from rewards.library import NAMES, TOOLS, source
from rewards.models import RewardFunction, RewardFunctionVersion
from rewards.toolspec import ToolError, environment_signature, tool_signature

MAX_SOURCE_BYTES = 1024 * 1024


class RewardCodeError(ValueError):
    """The code cannot be saved; the message names the line where there is one."""


def normalize(code: str) -> str:
    """Browsers submit textarea text with CRLF line ends; store LF so equal code compares equal."""
    return code.replace("\r\n", "\n").replace("\r", "\n")


def check_source(code: str, entrypoint: str, kind: str = RewardFunction.Kind.REWARD) -> None:
    """Cheap checks before saving (the sandbox checks the rest): size, syntax, and that the entrypoint is defined;
    a tool's signature too (typed, documented parameters: what the model is shown), read without running it."""
    if len(code.encode()) > MAX_SOURCE_BYTES:
        raise RewardCodeError(f"the code is {len(code.encode())} bytes; the limit is {MAX_SOURCE_BYTES}")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise RewardCodeError(f"line {exc.lineno}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:  # nested too deeply, or a NUL byte
        raise RewardCodeError(f"the code cannot be parsed ({type(exc).__name__})") from None
    if kind == RewardFunction.Kind.ENVIRONMENT:  # the entrypoint is a class, read without running it
        try:
            environment_signature(code, entrypoint)
        except ToolError as exc:
            raise RewardCodeError(str(exc)) from None
        return
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if entrypoint not in names:
        raise RewardCodeError(
            f"no top-level function named '{entrypoint}' (found: {', '.join(sorted(names)) or 'none'})"
        )
    if kind == RewardFunction.Kind.TOOL:
        try:
            tool_signature(code, entrypoint)
        except ToolError as exc:
            raise RewardCodeError(str(exc)) from None


@transaction.atomic
def reward_create(
    *,
    owner,
    name: str,
    source_code: str,
    entrypoint: str,
    description: str = "",
    template: str = "",
    kind: str = RewardFunction.Kind.REWARD,
) -> RewardFunction:
    source_code = normalize(source_code)
    check_source(source_code, entrypoint, kind)
    rf = RewardFunction.objects.create(owner=owner, name=name, description=description, template=template, kind=kind)
    RewardFunctionVersion.objects.create(function=rf, number=1, source=source_code, entrypoint=entrypoint)
    return rf


@transaction.atomic
def reward_save(
    *, function: RewardFunction, source_code: str, entrypoint: str, description: str | None = None
) -> tuple[RewardFunctionVersion, bool]:
    """Save the code as a new version if it changed; return (latest version, whether one was created)."""
    source_code = normalize(source_code)
    check_source(source_code, entrypoint, function.kind)
    rf = RewardFunction.objects.select_for_update().get(pk=function.pk)
    if description is not None and description != rf.description:
        rf.description = description
        rf.save(update_fields=["description"])
    latest = rf.latest_version
    if latest and latest.source == source_code and latest.entrypoint == entrypoint:
        return latest, False
    number = (rf.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    return RewardFunctionVersion.objects.create(
        function=rf, number=number, source=source_code, entrypoint=entrypoint
    ), True


def docstring(code: str, entrypoint: str) -> str:
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == entrypoint:
            return ast.get_docstring(node) or ""
    return ""


def tool_builtins_install(*, owner, names=None) -> list[RewardFunction]:
    """Give ``owner`` an editable copy of each library tool (the calculator), kind "tool"; names they have are
    skipped."""
    created = []
    for name in TOOLS if names is None else names:
        if not RewardFunction.objects.filter(owner=owner, name=name).exists():
            code = source(name)
            created.append(
                reward_create(
                    owner=owner,
                    name=name,
                    source_code=code,
                    entrypoint=name,
                    description=docstring(code, name),
                    template=name,
                    kind=RewardFunction.Kind.TOOL,
                )
            )
    return created


def reward_builtins_install(*, owner, names=None) -> list[RewardFunction]:
    """Give ``owner`` an editable copy of each library function (``names``: of these; by default the everyday set,
    not open-r1's, which a recipe that names them adds); names they already have are skipped."""
    created = []
    for name in NAMES if names is None else names:
        if not RewardFunction.objects.filter(owner=owner, name=name).exists():
            code = source(name)
            created.append(
                reward_create(
                    owner=owner,
                    name=name,
                    source_code=code,
                    entrypoint=name,
                    description=docstring(code, name),
                    template=name,
                )
            )
    return created


# Who pins versions of a reward function: each question takes version ids and returns what pins them ("run 'x' of
# alice"). rewards sits below runs, so runs registers its question here (runs.apps) instead of rewards importing runs.
VERSION_USERS: list[Callable[[set[int]], list[str]]] = []


def reward_function_removal(*, function: RewardFunction) -> Removal:
    """What deleting ``function`` removes (the function, its versions, its shares), or why it may not: a run or a
    job pins one of its versions, and deleting the code would leave it unable to start, resume or be replayed."""
    ids = set(function.versions.values_list("pk", flat=True))
    pinned = [who for ask in VERSION_USERS for who in ask(ids)]
    label = f"the {function.get_kind_display()} '{function.name}'"
    return Removal(
        label=label,
        rows=[
            f"{label}",
            counted(len(ids), "version"),
            counted(function.shares.count(), "team share"),
        ],
        refusals=[f"{label} is used by {who}: delete that first" for who in pinned],
    )


def reward_function_delete(*, function: RewardFunction, user) -> Removal:
    """Delete a reward function its owner no longer needs, with its versions and shares; DeleteRefused (with the
    reasons) while a run or job pins a version of it. Only the owner deletes: anyone else is refused as if it did
    not exist (the caller selects by owner)."""
    if function.owner_id != user.pk:
        raise PermissionError("only the owner deletes a reward function")
    with transaction.atomic():
        function = RewardFunction.objects.select_for_update().get(pk=function.pk)
        removal = reward_function_removal(function=function)
        removal.check()
        function.delete()
    return removal
