"""Clients of the JSON API that authenticate as a script would: a personal access token, no session."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.accounts.services import token_create
from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event


def api_client(user, scope: str = "write") -> Client:
    _, raw = token_create(owner=user, name=f"{scope} test token", scope=scope)
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def owner_api(owner):
    return api_client(owner)


@pytest.fixture
def outsider_api(outsider):
    return api_client(outsider)


@pytest.fixture
def reader_api(owner):
    """The owner's read-only token."""
    return api_client(owner, "read")


@pytest.fixture
def inspected_run(owner, dataset_version):
    """A finished run with two steps of rollouts and metrics, through the real ingest."""
    run = make_run(owner, dataset_version, name="api run")
    ingest(
        run,
        rollouts_event(
            1,
            [
                ("1+1?", [("I think 2", [1.0, 0.5]), ("3", [0.0, 1.0])]),
                ("2+2?", [("4", [1.0, 1.0]), ("Wait, 4", [1.0, 0.8])]),
            ],
        ),
        metrics_event(1, reward=1.2, loss=0.1),
        rollouts_event(2, [("1+1?", [("2", [1.0, 1.0]), ("2, wait", [1.0, 0.6])])]),
        metrics_event(2, reward=1.6, loss=0.05),
    )
    run.refresh_from_db()
    return run
