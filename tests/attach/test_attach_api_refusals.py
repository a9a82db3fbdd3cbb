"""The attach API against hostile and mistaken clients: each refusal is a 4xx naming what is wrong, and nothing of
a refused batch is stored; a batch sent again is acknowledged, not stored twice."""

import gzip
import json

import pytest

from runs.models import Rollout, Run, StepMetric
from tests.attach.conftest import token_client
from tests.attach.test_external_runs import batch, metrics

pytestmark = pytest.mark.django_db


def lines(*events) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def send(api, created, data: bytes, offset: int, *, zipped=True, key=None):
    return api.post(
        f"/api/attach/runs/{created['id']}/events?offset={offset}",
        gzip.compress(data) if zipped else data,  # not zipped: sent as it is, still said to be gzip
        content_type="application/x-ndjson",
        headers={"Content-Encoding": "gzip"},
        HTTP_X_RESUME_KEY=key or created["resume_key"],
    )


def test_a_batch_sent_again_or_overlapping_is_taken_once(attached):
    api, created = attached
    first, second = lines(batch(1), metrics(1)), lines(batch(2))
    assert send(api, created, first, 0).json()["taken"] == len(first)
    assert send(api, created, first, 0).json()["taken"] == len(first)  # an acknowledgement lost: sent again
    overlap = send(api, created, first + second, 0)  # from an older offset, with new bytes after
    assert overlap.status_code == 200 and overlap.json()["taken"] == len(first) + len(second)
    assert Rollout.objects.filter(run=created["id"]).count() == 8
    gap = send(api, created, lines(batch(3)), len(first) + len(second) + 10)
    assert gap.status_code == 409 and gap.json()["expected"] == len(first) + len(second)


@pytest.mark.parametrize(
    "body,zipped,expected",
    [
        (b"\x1f\x8b\x08\x00garbage", False, "gzip stream is cut short"),
        (b"plain text, said to be gzip", False, "not valid gzip"),
        (b"this is not json\n", True, "line 2 (spool byte 1039): not JSON"),
        (b'{"type": "rollouts", "step": 1, "rows": [{"index": "0"}]}\n', True, "rows[0].index: must be an integer"),
        (b'{"type": "metrics", "step": -1, "metrics": {}}\n', True, "line 2 (spool byte 1039): step"),
        (b'{"type": "metrics", "step": 1, "metrics": {"loss": NaN}}\n', True, "not JSON"),
        (b'{"type": "shell", "step": 1}\n', True, "type: must be one of"),
        (b'{"type": "metrics", "step": 1, "metrics": {}}', True, "complete line"),
    ],
)
def test_a_bad_batch_is_refused_by_name_and_stores_nothing(attached, body, zipped, expected):
    api, created = attached
    good = lines(batch(1))
    answer = send(api, created, good + body if zipped else body, 0, zipped=zipped)
    assert answer.status_code == 400 and expected in answer.json()["detail"], answer.content
    assert not Rollout.objects.filter(run=created["id"]).exists()
    assert Run.objects.get(pk=created["id"]).received_bytes == 0


def test_a_line_too_long_and_a_bomb_are_refused(attached, settings):
    api, created = attached
    settings.GRPO_ATTACH_MAX_LINE_BYTES = 1000
    big = batch(1, n=40)
    answer = send(api, created, lines(big), 0)
    assert answer.status_code == 400 and "longer than 1000 bytes" in answer.json()["detail"]
    settings.GRPO_ATTACH_MAX_EXPANDED_BYTES = 10_000
    bomb = send(api, created, b" " * 1_000_000, 0)
    assert bomb.status_code == 413 and "expands past" in bomb.json()["detail"]
    assert not Rollout.objects.filter(run=created["id"]).exists()


def test_another_users_run_a_wrong_key_and_a_read_token_are_refused(attached, owner, outsider):
    api, created = attached
    data = lines(batch(1))
    assert send(token_client(outsider), created, data, 0).status_code == 404
    assert send(api, created, data, 0, key="not-the-key").status_code == 403
    assert send(token_client(owner, "read"), created, data, 0).status_code == 403
    assert token_client(owner, "read").post("/api/attach/runs", {}, content_type="application/json").status_code == 403
    assert not Rollout.objects.filter(run=created["id"]).exists()
    # an attach token reaches nothing else
    assert api.get("/api/runs").status_code == 403


def test_heartbeat_and_finish(attached, owner_client):
    api, created = attached
    key = {"resume_key": created["resume_key"]}
    assert (
        api.post(f"/api/attach/runs/{created['id']}/heartbeat", key, content_type="application/json").status_code == 200
    )
    run = Run.objects.get(pk=created["id"])
    assert not run.lost_contact
    Run.objects.filter(pk=run.pk).update(last_contact_at=run.last_contact_at.replace(year=2000))
    page = owner_client.get(run.get_absolute_url())
    assert page.status_code == 200 and "lost contact" in page.content.decode()
    finished = api.post(
        f"/api/attach/runs/{created['id']}/finish", {**key, "failed": False}, content_type="application/json"
    )
    assert finished.status_code == 200
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and not run.lost_contact


def test_a_batch_is_stored_as_the_log_reads_it_again(attached):
    """A batch is parsed once, to be checked, and stored as parsed: what it stores is what reading the run's event
    log again gives (a supervisor-style re-read), lone surrogates, a metrics line without a time and all."""
    from runs.paths import event_log_path
    from runs.rollouts.ingest import ingest_log

    api, created = attached
    odd = batch(1)
    odd["rows"][0]["completion"] = "half a pair \ud800 here"  # json.dumps writes it as the escape \ud800
    odd["rows"][1]["columns"] = {"id": 2**63 + 5, "nested": {"k": [1, None, "x"]}}
    no_time = {"type": "metrics", "step": 1, "max_steps": 3, "metrics": {"reward": 0.25}}
    answer = send(api, created, lines(odd, no_time), 0)
    assert answer.status_code == 200, answer.content
    run = Run.objects.get(pk=created["id"])
    stored = list(Rollout.objects.filter(run=run).order_by("index").values("completion", "columns"))
    assert stored[0]["completion"] == "half a pair \ufffd here"
    assert stored[1]["columns"] == {"id": 2**63 + 5, "nested": {"k": [1, None, "x"]}}
    assert StepMetric.objects.get(run=run, step=1).metrics == {"reward": 0.25}

    Rollout.objects.filter(run=run).delete()
    StepMetric.objects.filter(run=run).delete()
    Run.objects.filter(pk=run.pk).update(event_offset=0)
    run.refresh_from_db()
    ingest_log(run, event_log_path(run))
    assert list(Rollout.objects.filter(run=run).order_by("index").values("completion", "columns")) == stored
    assert StepMetric.objects.get(run=run, step=1).metrics == {"reward": 0.25}
