"""Teams and what is shared with them: the one rule every object endpoint asks.

A team is a Django auth ``Group``; its members are the group's users. An object (a dataset, a reward function, a run)
is visible to its owner and to every member of a team it is shared with; it is writable by its owner and by members
of a team it is shared with for writing. Anyone else gets a 404, never a 403: an outsider cannot tell it exists.

This module sits below both ``runs`` and ``rewards`` (they each keep a share table of their own), so it imports only
Django.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import Group
from django.db import models
from django.shortcuts import redirect


class SharedQuerySet(models.QuerySet):
    """A queryset of an owned model whose share table names it ``shares`` (a ``ShareBase`` subclass)."""

    def visible_to(self, user, *, write: bool = False) -> SharedQuerySet:
        if not getattr(user, "is_authenticated", False):
            return self.none()
        shares = self.model.shares.rel.related_model.objects.filter(team__user=user)
        if write:
            shares = shares.filter(can_write=True)
        # a subquery, not a join: no duplicate rows when two of the user's teams share the same object
        field = self.model.shares.rel.field.attname
        return self.filter(models.Q(owner=user) | models.Q(pk__in=shares.values(field)))

    def shared_with(self, user) -> SharedQuerySet:
        """Objects of others that reach ``user`` through a team."""
        return self.visible_to(user).exclude(owner=user)


class ShareBase(models.Model):
    """One object shared with one team; ``can_write`` lets the team change it as the owner could (not delete it,
    not share it further)."""

    team = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="+")
    can_write = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True

    @property
    def access(self) -> str:
        return "read and write" if self.can_write else "read"


def teams_of(user):
    return (
        Group.objects.filter(user=user).order_by("name")
        if getattr(user, "is_authenticated", False)
        else Group.objects.none()
    )


class ShareRefused(Exception):
    pass


ACCESS = {"read": False, "write": True}  # the share form's choices; "none" removes the share


def share_update(*, obj, user, team_id, access: str) -> str:
    """Share ``obj`` (a model with ``owner`` and ``shares``) with one of ``user``'s teams, change the access, or stop
    sharing (``access="none"``). Only the owner shares, and only with a team they belong to."""
    if obj.owner_id != user.pk:
        raise ShareRefused("only the owner can share it")
    team = teams_of(user).filter(pk=team_id).first() if str(team_id).isdigit() else None
    if team is None:
        raise ShareRefused("pick one of your teams")
    if access == "none":
        obj.shares.filter(team=team).delete()
        return f"No longer shared with {team.name}."
    if access not in ACCESS:
        raise ShareRefused("access must be read, write or none")
    obj.shares.update_or_create(team=team, defaults={"can_write": ACCESS[access]})
    return f"Shared with {team.name} ({'read and write' if ACCESS[access] else 'read'})."


def share_context(obj, user) -> dict:
    """What the share box (templates/sharing.html) needs."""
    return {
        "shares": list(obj.shares.select_related("team").order_by("team__name")),
        "share_teams": list(teams_of(user)) if obj.owner_id == user.pk else [],
        "is_owner": obj.owner_id == user.pk,
    }


def share_post(request, obj):
    """The share box's POST, for any shareable object: a message, then back to the object's page."""
    try:
        messages.success(
            request,
            share_update(
                obj=obj, user=request.user, team_id=request.POST.get("team", ""), access=request.POST.get("access", "")
            ),
        )
    except ShareRefused as exc:
        messages.error(request, f"Not shared: {exc}.")
    return redirect(obj)
