"""A request without credentials, or with a token that is not a live one, is answered 401 with the reason, on
every method: never the session's "CSRF check Failed" (a script that sent a token has no session to check)."""

import pytest
from django.test import Client
from django.urls import reverse

from runs.accounts.services import token_create

pytestmark = pytest.mark.django_db

NOT_LIVE = "Authorization: not a live token (unknown, revoked, or its user deactivated)"


def post(header: str | None, path: str = "/api/attach/runs"):
    client = Client(enforce_csrf_checks=True, headers={"Authorization": header} if header else {})
    return client.post(path, {"name": "x"}, content_type="application/json")


@pytest.mark.parametrize(
    "header, reason",
    [
        (None, "not logged in: send Authorization: Bearer <token>"),
        ("Bearer gwp_not-a-token", NOT_LIVE),
        ("Bearer gwp_" + "x" * 300, NOT_LIVE),
        ("Token gwp_abc", "Authorization: send Bearer <token>"),
        ("gwp_abc", "Authorization: send Bearer <token>"),
    ],
)
@pytest.mark.parametrize("path", ["/api/attach/runs", "/api/rewards", "/api/runs/import"])
def test_a_missing_or_mistyped_token_is_a_401_with_the_reason(header, reason, path):
    answer = post(header, path)
    assert answer.status_code == 401, answer.content
    assert reason in answer.json()["detail"]


def test_a_revoked_token_is_a_401_with_the_reason(owner_client, owner):
    token, raw = token_create(owner=owner, name="script", scope="attach")
    assert post(f"Bearer {raw}").status_code == 200
    assert owner_client.post(reverse("token_revoke", args=[token.pk])).status_code == 302
    answer = post(f"Bearer {raw}")
    assert answer.status_code == 401 and NOT_LIVE in answer.json()["detail"]


def test_a_deactivated_users_token_is_a_401_with_the_reason(owner):
    _, raw = token_create(owner=owner, name="script", scope="write")
    owner.is_active = False
    owner.save()
    answer = Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/me")
    assert answer.status_code == 401 and NOT_LIVE in answer.json()["detail"]


def test_a_session_still_needs_its_csrf_token(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    answer = client.post("/api/attach/runs", {"name": "x"}, content_type="application/json")
    assert answer.status_code == 403 and "CSRF" in answer.json()["detail"]
