"""A hub id names a dataset on the hub, never a folder on the server: datasets.load_dataset tries a local folder of
the id's name first, so "var" (the data folder, every user's datasets and logs) or "../x" must not reach it as a
path. Local data comes only through the import folders."""

import json

import pytest
from django.urls import reverse

from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import_hf
from runs.models import Dataset

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("hub_id", ["..", "../x", "var/../x", "./var", ".hidden", "-x", "a/../../etc", "/etc/x"])
def test_the_form_refuses_an_id_that_reads_as_a_path(owner_client, hub_id):
    response = owner_client.post(reverse("dataset_upload"), {"source": "hf", "hf-name": "x", "hf-hub_id": hub_id})
    assert response.status_code == 400
    assert "A hub id looks like" in response.content.decode()


def test_a_hub_id_naming_a_folder_beside_the_server_loads_nothing_from_it(owner, settings, tmp_path, monkeypatch):
    """A folder named like the id, where the server runs, is not read: the id goes to the (offline) hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings.BASE_DIR = tmp_path  # the server's folder, holding a folder the id names
    (tmp_path / "leak").mkdir()
    (tmp_path / "leak" / "train.jsonl").write_text(json.dumps({"prompt": "another user's row"}) + "\n")
    with pytest.raises(DatasetError) as refused:
        dataset_import_hf(owner=owner, name="x", hub_id="leak")
    assert "cannot reach the Hugging Face hub for 'leak'" in str(refused.value)
    assert not Dataset.objects.exists()


@pytest.mark.parametrize("hub_id", ["..", "../leak", "/etc"])
def test_the_service_refuses_an_id_that_reads_as_a_path(owner, hub_id):
    with pytest.raises(DatasetError, match="hub id: a hub id looks like"):
        dataset_import_hf(owner=owner, name="x", hub_id=hub_id)
