"""The settings pages: personal access tokens and teams; and the share box of datasets and runs."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from grpo_web.sharing import share_post, teams_of
from runs.access import visible_run
from runs.accounts.services import AccountError, team_add_member, team_create, team_leave, token_create, token_revoke
from runs.models import ApiToken, Dataset


def tokens(request):
    created = None
    if request.method == "POST":
        try:
            _, created = token_create(
                owner=request.user, name=request.POST.get("name", ""), scope=request.POST.get("scope", "")
            )
        except AccountError as exc:
            messages.error(request, f"No token made: {exc}.")
    return render(
        request,
        "accounts/tokens.html",
        {
            "tokens": request.user.api_tokens.all(),
            "created": created,
            "scopes": ApiToken.Scope.values,
        },
        status=201 if created else 200,
    )


@require_POST
def token_revoke_view(request, pk):
    token = get_object_or_404(ApiToken, pk=pk, owner=request.user)
    token_revoke(token=token)
    messages.success(request, f"Revoked {token.name}: it no longer works.")
    return redirect("tokens")


def teams(request):
    if request.method == "POST":
        try:
            team = team_create(name=request.POST.get("name", ""), by=request.user)
        except AccountError as exc:
            messages.error(request, f"No team made: {exc}.")
        else:
            messages.success(request, f"Made {team.name}; add its members below.")
        return redirect("teams")
    mine = teams_of(request.user).prefetch_related("user_set")
    return render(request, "accounts/teams.html", {"teams": mine})


@require_POST
def team_member_add(request, pk):
    team = get_object_or_404(teams_of(request.user), pk=pk)
    try:
        team_add_member(team=team, username=request.POST.get("username", ""), by=request.user)
    except AccountError as exc:
        messages.error(request, f"Not added: {exc}.")
    return redirect("teams")


@require_POST
def team_leave_view(request, pk):
    team = get_object_or_404(teams_of(request.user), pk=pk)
    team_leave(team=team, user=request.user)
    messages.success(request, f"You left {team.name}.")
    return redirect("teams")


@require_POST
def dataset_share(request, pk):
    return share_post(request, get_object_or_404(Dataset.objects.visible_to(request.user), pk=pk))


@require_POST
def run_share(request, pk):
    return share_post(request, visible_run(request, pk))
