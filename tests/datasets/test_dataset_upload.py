"""JSON-lines upload: a preview on success; on bad input an error naming the line and column, and nothing saved."""

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from runs.models import Dataset, DatasetVersion

pytestmark = pytest.mark.django_db


def _upload(client, content: bytes, name="rows.jsonl"):
    return client.post(reverse("dataset_upload"), {"name": "my data", "file": SimpleUploadedFile(name, content)})


def _stored_files():
    folder = Path(settings.DATA_DIR) / "datasets"
    return set(folder.glob("*")) if folder.exists() else set()


def test_it_imports_rows_and_shows_a_preview(owner_client):
    rows = [{"prompt": "What is 2 + 2?", "answer": "4"}, {"prompt": "<b>bold</b>?", "answer": "5"}]
    response = _upload(owner_client, "".join(json.dumps(r) + "\n" for r in rows).encode())
    assert response.status_code == 302
    version = DatasetVersion.objects.get()
    assert (version.row_count, version.columns) == (2, ["prompt", "answer"])
    page = owner_client.get(response["Location"]).content.decode()
    assert "What is 2 + 2?" in page
    assert "&lt;b&gt;bold&lt;/b&gt;?" in page and "<b>bold</b>" not in page


def test_it_rejects_a_broken_json_line_naming_it_and_saves_nothing(owner_client):
    before = _stored_files()
    content = b'{"prompt": "ok", "answer": "1"}\n{"prompt": "broken", \n{"prompt": "ok too"}\n'
    response = _upload(owner_client, content)
    assert response.status_code == 400
    assert "line 2, column 22: not valid JSON" in response.content.decode()
    assert not Dataset.objects.exists() and not DatasetVersion.objects.exists()
    assert _stored_files() == before


def test_it_rejects_a_row_without_prompt_naming_line_and_column(owner_client):
    content = b'{"prompt": "ok"}\n{"question": "where is the prompt?"}\n{"prompt": "   "}\n'
    response = _upload(owner_client, content)
    body = response.content.decode()
    assert response.status_code == 400
    assert "line 2: column &#x27;prompt&#x27; is missing" in body
    assert "line 3: column &#x27;prompt&#x27; must be non-empty text" in body
    assert not Dataset.objects.exists()


def test_it_rejects_non_utf8_and_non_objects(owner_client):
    response = _upload(owner_client, b'{"prompt": "ok"}\n\xff\xfe\n[1, 2]\n')
    body = response.content.decode()
    assert "line 2, column 1: not UTF-8 text" in body
    assert "line 3: expected a JSON object, got list" in body
    assert not Dataset.objects.exists()


def test_it_rejects_an_empty_file(owner_client):
    response = _upload(owner_client, b"\n\n")
    assert response.status_code == 400
    assert not Dataset.objects.exists()
