"""Personal access tokens: made on the Tokens page, kept only as a hash, scoped read or write, revocable."""

import pytest
from django.test import Client
from django.urls import reverse

from runs.accounts.services import token_create, token_digest
from runs.models import ApiToken
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db


def test_the_tokens_page_shows_a_new_token_once_and_keeps_only_its_hash(owner_client, owner):
    response = owner_client.post(reverse("tokens"), {"name": "laptop", "scope": "write"})
    assert response.status_code == 201
    raw = response.context["created"]
    assert raw.startswith("gwp_") and raw in response.content.decode()
    token = ApiToken.objects.get(owner=owner)
    assert token.digest == token_digest(raw) and raw not in (token.digest, token.hint, token.name)
    again = owner_client.get(reverse("tokens")).content.decode()
    assert raw not in again and token.hint in again


def test_a_token_reads_the_api_without_a_session(owner):
    response = api_client(owner).get("/api/me")
    assert response.status_code == 200
    assert response.json() == {"username": "owner", "teams": [], "scope": "write"}


@pytest.mark.parametrize(
    "header", [None, "Bearer gwp_not-a-token", "Bearer ", "Token abc", "Bearer " + "x" * 5000, "Bearer gwp_\x00\x01"]
)
def test_no_or_a_wrong_token_is_a_401_in_json_never_a_login_page(header):
    client = Client(headers={"Authorization": header} if header else {})
    response = client.get("/api/runs")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")


def test_a_revoked_token_stops_working_at_once(owner_client, owner):
    token, raw = token_create(owner=owner, name="ci", scope="read")
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    assert client.get("/api/me").status_code == 200
    assert owner_client.post(reverse("token_revoke", args=[token.pk])).status_code == 302
    assert client.get("/api/me").status_code == 401


def test_a_read_token_may_only_read(reader_api):
    assert reader_api.get("/api/runs").status_code == 200
    response = reader_api.post(
        "/api/rewards", {"name": "nope", "template": "digit_ratio"}, content_type="application/json"
    )
    assert response.status_code == 403
    assert "only read" in response.json()["detail"]
    assert reader_api.get("/api/me").json()["scope"] == "read"


def test_a_token_of_a_deactivated_user_stops_working(owner):
    client = api_client(owner)
    owner.is_active = False
    owner.save()
    assert client.get("/api/me").status_code == 401


def test_nobody_revokes_another_users_token(outsider_client, owner):
    token, _ = token_create(owner=owner, name="mine", scope="read")
    assert outsider_client.post(reverse("token_revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.active


@pytest.mark.parametrize("data", [{"name": "", "scope": "read"}, {"name": "x", "scope": "admin"}, {}])
def test_a_token_needs_a_name_and_a_known_scope(owner_client, owner, data):
    response = owner_client.post(reverse("tokens"), data, follow=True)
    assert "No token made" in response.content.decode()
    assert not ApiToken.objects.filter(owner=owner).exists()


def test_the_session_works_for_the_apps_own_pages_with_csrf(owner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.get("/api/me").json()["scope"] == "write"
    # a session is a browser: a change without the CSRF token is refused
    response = client.post("/api/rewards", {"name": "x", "template": "digit_ratio"}, content_type="application/json")
    assert response.status_code in (401, 403)
