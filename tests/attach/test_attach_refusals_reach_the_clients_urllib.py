"""Through the real web server (uvicorn), with the attach client's own transport (grpo_web_attach.sender.Api, Python's
urllib, which sends a whole body before it reads the answer): a body over its URL's limit is answered 413, and read,
not a connection reset the client would take for a server it never reached; a token that is not a live one is a 401
saying so; a batch that cannot be stored whole is a 400 naming the line, and nothing of it is stored."""

from __future__ import annotations

import gzip
import json

import pytest
from grpo_web_attach.sender import Api

from runs.accounts.services import token_create
from runs.models import ApiToken, Rollout, Run
from tests.attach.test_attach_api_refusals import lines
from tests.attach.test_attach_batches_are_stored_whole_or_refused_whole import with_rows
from tests.attach.test_external_runs import batch
from tests.conftest import running_web_server

pytestmark = pytest.mark.django_db(transaction=True)

BATCH_LIMIT = (
    4 * 1024**2
)  # GRPO_ATTACH_MAX_BATCH_BYTES of this module's server: a body past it outgrows the sockets' buffers


@pytest.fixture(scope="module")
def small_server(service_env, tmp_path_factory):
    env = {**service_env, "GRPO_ATTACH_MAX_BATCH_BYTES": str(BATCH_LIMIT)}
    with running_web_server(env, tmp_path_factory.mktemp("web") / "web.log") as url:
        yield url


@pytest.fixture
def client(small_server, owner):
    _, raw = token_create(owner=owner, name="script", scope="attach")
    api = Api(small_server, raw, timeout=60)
    status, created = api.json("POST", "/runs", {"name": "script", "reward_names": ["accuracy"]})
    assert status == 200, created
    return api, created


def test_a_batch_over_the_limit_is_a_413_the_client_reads(client):
    api, created = client
    body = b"x" * (2 * BATCH_LIMIT)  # past the limit and the room for headers the server keeps (1 MiB)
    status, answer = api.call(
        "POST",
        f"/runs/{created['id']}/events?offset=0",
        body,
        {"Content-Encoding": "gzip", "Content-Type": "application/x-ndjson", "X-Resume-Key": created["resume_key"]},
    )
    assert status == 413 and "The request is larger than this URL takes" in answer["detail"], answer
    assert Run.objects.get(pk=created["id"]).received_bytes == 0
    # the server goes on taking batches, from the same client
    good = gzip.compress(lines(batch(1)))
    status, answer = api.call(
        "POST",
        f"/runs/{created['id']}/events?offset=0",
        good,
        {"Content-Encoding": "gzip", "Content-Type": "application/x-ndjson", "X-Resume-Key": created["resume_key"]},
    )
    assert status == 200 and answer["rollouts"] == 4
    assert Rollout.objects.filter(run=created["id"]).count() == 4


def test_a_json_body_over_the_form_limit_is_a_413_the_client_reads(client):
    api, _ = client
    big = {"name": "big", "command": "x" * (4 * 1024**2)}
    status, answer = api.call("POST", "/runs", json.dumps(big).encode())
    assert status == 413 and "larger than this URL takes" in answer["detail"], answer
    assert not Run.objects.filter(name="big").exists()


def test_a_revoked_token_is_a_401_that_says_so(client):
    api, created = client
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    status, answer = api.json("POST", f"/runs/{created['id']}/heartbeat", {"resume_key": created["resume_key"]})
    assert status == 401 and "not a live token" in answer["detail"], answer
    status, answer = Api(api.url, "", timeout=60).json("POST", "/runs", {"name": "no token"})
    assert status == 401 and "not a live token" in answer["detail"], answer


def _deep(depth: int) -> bytes:
    return b'{"type": "metrics", "step": 1, "metrics": {}, "x": ' + b"[" * depth + b"]" * depth + b"}\n"


PARTIAL = {
    "an index twice": (lines(with_rows(batch(1), lambda r: r[3].update(index=2, group=1))), "rows[3].index: 2 again"),
    "five rewards for one name": (
        lines(with_rows(batch(1), lambda r: r[1].update(rewards=[1.0, 0.0, 1.0, 0.0, 1.0]))),
        "rows[1].rewards: 5 values for this run's 1 reward",
    ),
    "a group past the group size": (
        lines(with_rows(batch(1), lambda r: r[2].update(group=99))),
        "rows[2].group: 99, not index // num_generations",
    ),
    "keys sent again": (lines(batch(2)) + lines(batch(2)), "step 2, index 0 is sent twice in this batch"),
    "nested past the limit": (_deep(1100), "nested"),
}


@pytest.mark.parametrize("case", PARTIAL)
def test_a_batch_that_cannot_be_stored_whole_is_a_400_and_stores_nothing(client, case):
    # each with a good step before it in the same batch: nothing of it is stored, the count is none
    api, created = client
    body, expected = PARTIAL[case]
    status, answer = api.call(
        "POST",
        f"/runs/{created['id']}/events?offset=0",
        gzip.compress(lines(batch(1, n=2)) + body),
        {"Content-Encoding": "gzip", "Content-Type": "application/x-ndjson", "X-Resume-Key": created["resume_key"]},
    )
    assert status == 400 and expected in answer["detail"], answer
    run = Run.objects.get(pk=created["id"])
    assert run.received_bytes == 0 and not Rollout.objects.filter(run=run).exists()
