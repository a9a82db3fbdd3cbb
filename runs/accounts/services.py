"""Personal access tokens (the JSON API and the command-line client) and teams (grpo_web.sharing)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.models import ApiToken

TOKEN_TOUCH = timedelta(minutes=1)  # last_used_at is written at most this often per token


class AccountError(Exception):
    pass


def token_digest(raw: str) -> str:
    # a token is 32 random bytes: a plain SHA-256 is as safe as a slow hash here, and a lookup stays one index read
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def token_create(*, owner, name: str, scope: str) -> tuple[ApiToken, str]:
    """A new token; the plain text is returned once and never stored."""
    name = name.replace("\x00", "").strip()[:100]  # PostgreSQL stores no NUL, not even in text
    if not name:
        raise AccountError("name the token (what it is for)")
    if scope not in ApiToken.Scope.values:
        raise AccountError("scope must be read, write or attach")
    raw = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        owner=owner, name=name, scope=scope, digest=token_digest(raw), hint=raw[: len(ApiToken.PREFIX) + 6]
    )
    return token, raw


def token_revoke(*, token: ApiToken) -> None:
    if token.active:
        token.revoke()


def token_user(raw: str) -> tuple[object, str] | None:
    """(user, scope) for a live token, else None (unknown, revoked, or its user deactivated)."""
    if not raw.startswith(ApiToken.PREFIX) or len(raw) > 200:
        return None
    token = ApiToken.objects.select_related("owner").filter(digest=token_digest(raw), revoked_at=None).first()
    if token is None or not token.owner.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > TOKEN_TOUCH:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.owner, token.scope


def team_create(*, name: str, by) -> Group:
    name = " ".join(name.replace("\x00", "").split())[:150]  # PostgreSQL text cannot hold a NUL
    if not name:
        raise AccountError("name the team")
    try:
        with transaction.atomic():
            team = Group.objects.create(name=name)
    except IntegrityError:
        raise AccountError(f"a team named {name!r} exists already") from None
    by.groups.add(team)
    return team


def team_add_member(*, team: Group, username: str, by) -> None:
    """Any member may add a member (a small self-hosted team trusts its members)."""
    if not team.user_set.filter(pk=by.pk).exists():
        raise AccountError("only a member can add members")
    username = username.replace("\x00", "").strip()[:150]
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise AccountError(f"no user named {username!r}")
    team.user_set.add(user)


def team_leave(*, team: Group, user) -> None:
    """Leave a team; the last member to leave removes it (and with it every share to it)."""
    team.user_set.remove(user)
    if not team.user_set.exists():
        team.delete()
