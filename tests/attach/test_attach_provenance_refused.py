"""The reproducibility record a client sends with its run: stored as sent when it has the record's shape, refused
whole (422 naming the key, no run made) when it has not."""

import pytest
from grpo_web_attach import provenance

from runs.models import Run
from tests.attach.test_attach_api_refusals import token_client

pytestmark = pytest.mark.django_db


def create(api, record):
    body = {"name": "script", "reward_names": ["accuracy"], "config": {"max_steps": 3}, "provenance": record}
    return api.post("/api/attach/runs", body, content_type="application/json")


def test_a_record_made_by_the_client_s_own_code_is_stored_as_sent(owner):
    record = provenance.record(seed=3, script=__file__)
    made = create(token_client(owner), record)
    assert made.status_code == 200, made.content
    stored = Run.objects.get(pk=made.json()["id"]).provenance
    assert stored["libraries"] == record["libraries"] and stored["seed"] == 3
    assert stored["script"]["source"] == open(__file__).read()


@pytest.mark.parametrize(
    "record, key",
    [
        ({"libraries": {"trl": {"nested": 1}}}, "libraries"),
        ({"libraries": {f"lib{i}": "1" for i in range(65)}}, "libraries"),
        ({"seed": "forty-two"}, "seed"),
        ({"script": {"path": "x.py", "sha256": "0" * 64, "source": "x" * (256 * 1024 + 1)}}, "source"),
        ({"accelerator": {"devices": ["H200"] * 65}}, "devices"),
        ({"script": {"path": "x.py", "sha256": "0" * 64, "git": {"commit": "a", "changed": [1]}}}, "changed"),
        ("not a record", "provenance"),
    ],
)
def test_a_record_of_the_wrong_shape_is_refused_naming_the_key(owner, record, key):
    made = create(token_client(owner), record)
    assert made.status_code == 422, made.content
    assert key in made.content.decode()
    assert not Run.objects.filter(owner=owner).exists()
