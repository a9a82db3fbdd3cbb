"""The Local path import reads the server's import folders: the page names them, makes the default one (it did not
exist and nothing made it), says when it is empty and how to put a dataset there, and lists what is put there."""

import json

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_page_makes_the_import_folder_and_says_how_to_fill_it(owner_client, settings, tmp_path):
    folder = tmp_path / "imports"
    settings.GRPO_IMPORT_ROOTS = [folder]

    page = owner_client.get(reverse("dataset_upload")).content.decode()

    assert folder.is_dir()
    assert f"<li><code>{folder}</code></li>" in page and "(missing" not in page
    assert "Nothing is there yet. Put a dataset there on\n        the server, then reload this page" in page
    (folder / "gsm8k").mkdir()
    (folder / "gsm8k" / "train.jsonl").write_text(json.dumps({"prompt": "What is 1 + 1?", "answer": "2"}) + "\n")
    page = owner_client.get(reverse("dataset_upload")).content.decode()
    assert "Nothing is there yet" not in page and f'<option value="{folder / "gsm8k"}">imports/gsm8k/</option>' in page


def test_a_configured_folder_that_is_missing_is_said_to_be(owner_client, settings, tmp_path):
    (tmp_path / "first").mkdir()
    settings.GRPO_IMPORT_ROOTS = [tmp_path / "first", tmp_path / "second"]
    page = owner_client.get(reverse("dataset_upload")).content.decode()
    assert f"<li><code>{tmp_path / 'second'}</code> (missing: create it on\n        the server)</li>" in page
