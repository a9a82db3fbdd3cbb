"""While the database is away, a page, a page's poll and an API call are answered 503 "database unavailable,
retrying" with Retry-After (HTML for a page, JSON for a poll or the API), not a bare 500; once it is back, the same
requests are answered as before."""

import contextlib
import json
import socket
import urllib.error
import urllib.request

import pytest
from django.db import OperationalError, connection
from django.test import Client

from runs.accounts.services import token_create
from tests.conftest import free_port, running_web_server
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db

MESSAGE = "Database unavailable, retrying"


def _refused(execute, sql, params, many, context):
    raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')


@contextlib.contextmanager
def database_away():
    with connection.execute_wrapper(_refused):
        yield


def test_a_page_a_poll_and_an_api_call_get_a_503_while_the_database_is_away(owner, dataset_version):
    run = make_run(owner, dataset_version, name="watched")
    page, api = Client(raise_request_exception=False), Client(raise_request_exception=False)
    page.force_login(owner)
    _, raw = token_create(owner=owner, name="poll", scope="read")
    requests = {
        "page": lambda: page.get(f"/runs/{run.pk}/"),
        "poll": lambda: page.get(f"/runs/{run.pk}/metrics.json", headers={"Accept": "application/json"}),
        "api": lambda: api.get(f"/api/runs/{run.pk}", headers={"Authorization": f"Bearer {raw}"}),
    }
    with database_away():
        answers = {name: request() for name, request in requests.items()}
    for name, response in answers.items():
        assert response.status_code == 503, (name, response.status_code)
        assert int(response["Retry-After"]) > 0, name
    assert answers["page"]["Content-Type"].startswith("text/html")
    assert MESSAGE in answers["page"].content.decode()
    assert answers["poll"].json()["error"].startswith(MESSAGE)
    assert answers["api"].json()["detail"].startswith(MESSAGE)

    back = {name: request() for name, request in requests.items()}
    assert {name: r.status_code for name, r in back.items()} == {"page": 200, "poll": 200, "api": 200}


def test_another_server_error_is_still_a_500(owner, dataset_version, monkeypatch):
    from runs.rollouts import selectors

    def broken(*args, **kwargs):
        raise RuntimeError("a bug, not the database")

    monkeypatch.setattr(selectors, "metric_catalog", broken)  # what metrics.json reads
    run = make_run(owner, dataset_version, name="watched")
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    response = client.get(f"/runs/{run.pk}/metrics.json", headers={"Accept": "application/json"})
    assert response.status_code == 500 and "Retry-After" not in response


def test_the_real_server_answers_503_when_its_database_cannot_be_reached(service_env, tmp_path):
    """uvicorn, with its database at a port where nothing listens: an API call (its token is looked up) and a
    dataset's page are answered 503."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", free_port()))
        port = s.getsockname()[1]
    env = {**service_env, "DATABASE_URL": f"postgres://postgres@127.0.0.1:{port}/gone"}
    with running_web_server(env, tmp_path / "web.log") as url:
        request = urllib.request.Request(f"{url}/api/runs", headers={"Authorization": "Bearer gwp_not_a_live_token"})
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=60)
    assert answer.value.code == 503, answer.value.read()[:500]
    assert answer.value.headers["Retry-After"]
    assert json.loads(answer.value.read())["detail"].startswith(MESSAGE)
