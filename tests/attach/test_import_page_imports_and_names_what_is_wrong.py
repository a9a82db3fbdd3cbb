"""The import page: a server folder imports and opens the run; a refusal re-renders the form with the error
(escaped: file names come from users) and stores nothing; the dashboard links to it."""

import shutil

import pytest
from django.urls import reverse

from runs.models import Run

pytestmark = pytest.mark.django_db


def test_a_folder_imports_from_the_page(owner_client, root, verl_dumps):
    shutil.copytree(verl_dumps, root / "dumps")
    assert reverse("run_import_files") in owner_client.get(reverse("dashboard")).content.decode()
    answer = owner_client.post(reverse("run_import_files"), {"path": "dumps", "source": "verl", "name": "from page"})
    run = Run.objects.get(name="from page")
    assert answer.status_code == 302 and answer["Location"] == run.get_absolute_url()


def test_a_refusal_names_the_file_escaped_and_stores_nothing(owner_client, root):
    folder = root / "dumps"
    folder.mkdir()
    (folder / "1.jsonl").write_text('{"input": "<b>p</b>", "output": "o", "score": "<script>"}\n')
    answer = owner_client.post(reverse("run_import_files"), {"path": "dumps"})
    page = answer.content.decode()
    assert answer.status_code == 400 and "1.jsonl: line 1" in page and "&#x27;score&#x27;" in page
    assert "&#x27;&lt;script&gt;&#x27;" in page and "'<script>'" not in page and not Run.objects.exists()
