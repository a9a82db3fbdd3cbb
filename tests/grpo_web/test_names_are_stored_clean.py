"""Names are stored without control or bidi characters, whichever way they come in (a form, the API, the ORM), so
no page, terminal or log shows another user's escape sequences or reversed text (issue 30, item 10)."""

import io

import pytest

from runs.datasets.services import dataset_import
from runs.models import Recipe, Run
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db

HOSTILE = "ok\x1b]0;pwned\x07\x1b[2J \u202egnp.exe\x00 "


def test_a_dataset_uploaded_with_a_hostile_name_is_stored_clean(owner):
    stream = io.BytesIO(b'{"prompt": "a"}\n')
    version = dataset_import(owner=owner, name=HOSTILE, stream=stream, source_name="rows\u202elsonj.jsonl")
    version.dataset.refresh_from_db()
    assert version.dataset.name == "ok]0;pwned[2J gnp.exe"
    assert version.source_name == "rowslsonj.jsonl"


def test_a_run_made_by_the_orm_is_stored_clean(owner, dataset_version):
    run = Run.objects.create(
        owner=owner, name=HOSTILE, model="tiny", dataset_version=dataset_version, rewards=[], config={}, total_steps=1
    )
    run.refresh_from_db()
    assert run.name == "ok]0;pwned[2J gnp.exe"


def test_a_recipe_made_through_the_api_is_stored_clean(owner, dataset_version):
    body = {"template": "R1-Zero", "prompts": dataset_version.pk, "name": HOSTILE}
    response = api_client(owner).post("/api/recipes", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert Recipe.objects.get().name == "ok]0;pwned[2J gnp.exe"
