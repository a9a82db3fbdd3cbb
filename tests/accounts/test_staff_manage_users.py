"""The demo user is staff (issue 28: /admin/ refused it): staff add users in Django's admin and deactivate them from
the user list, after which the user can neither log in nor use a token. Other users see no Users link and get no
admin."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from runs.datasets import demo
from tests.api.conftest import api_client
from tests.conftest import logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_user(monkeypatch):
    monkeypatch.setattr(demo, "DEMO_DATASETS", {})  # the user is what matters here, not the datasets
    user, _ = demo.demo_load(password="demo")
    return user


def test_the_demo_user_is_staff_and_finds_the_user_admin(demo_user, owner):
    assert demo_user.is_staff and demo_user.is_superuser
    staff = logged_in(demo_user)
    assert 'id="nav-users"' in staff.get(reverse("dashboard")).content.decode()
    assert staff.get(reverse("admin:auth_user_changelist")).status_code == 200
    assert 'id="nav-users"' not in logged_in(owner).get(reverse("dashboard")).content.decode()
    assert logged_in(owner).get(reverse("admin:auth_user_changelist")).status_code == 302  # to the admin's login


def test_staff_add_a_user_who_then_logs_in(demo_user):
    response = logged_in(demo_user).post(
        reverse("admin:auth_user_add"),
        {"username": "newcomer", "usable_password": "true", "password1": "a-long-pass-9", "password2": "a-long-pass-9"},
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Client().login(username="newcomer", password="a-long-pass-9")


def test_staff_deactivate_a_user_who_can_no_longer_log_in_or_use_a_token(demo_user, outsider):
    client = api_client(outsider)
    assert client.get("/api/me").status_code == 200
    response = logged_in(demo_user).post(
        reverse("admin:auth_user_changelist"),
        {"action": "deactivate", "_selected_action": [outsider.pk, demo_user.pk]},
        follow=True,
    )
    assert "Deactivated 1 user." in response.content.decode()
    assert not get_user_model().objects.get(pk=outsider.pk).is_active
    assert get_user_model().objects.get(pk=demo_user.pk).is_active  # not themselves
    assert not Client().login(username="outsider", password="outsider-pass")
    assert client.get("/api/me").status_code == 401
    logged_in(demo_user).post(
        reverse("admin:auth_user_changelist"), {"action": "reactivate", "_selected_action": [outsider.pk]}
    )
    assert Client().login(username="outsider", password="outsider-pass")
