"""The JSON API's /me: who the token or session belongs to (grpo_web/api.py mounts this router at /api/)."""

from __future__ import annotations

from ninja import Router, Schema
from pydantic import Field

from grpo_web.sharing import teams_of

router = Router()


class Me(Schema):
    username: str
    teams: list[str]
    scope: str = Field(description="'write' for a session or a write token, 'read' for a read token.")


@router.get("/me", response=Me, tags=["account"], summary="Who the token or session belongs to")
def me(request):
    return {
        "username": request.user.username,
        "teams": [t.name for t in teams_of(request.user)],
        "scope": getattr(request, "token_scope", "write"),
    }
