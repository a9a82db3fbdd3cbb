"""Hugging Face datasets: a local folder (save_to_disk, or a data folder) under the imports folder, or a hub id
when the server is online. No test downloads anything."""

import json
import shutil
import uuid

import pytest
from django.urls import reverse

from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import_hf, hf_import_root
from runs.models import Dataset

pytestmark = pytest.mark.django_db

ROWS = [{"question": "Tom has 3 apples and eats 1. How many are left?", "answer": "3 - 1 = 2\n#### 2"},
        {"question": "What is 6 / 2?", "answer": "6 / 2 = 3\n#### 3"}]


@pytest.fixture
def imports():
    folder = hf_import_root() / f"test-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder)


def test_a_dataset_saved_with_save_to_disk_is_imported(owner, imports):
    import datasets

    datasets.Dataset.from_list(ROWS).save_to_disk(str(imports / "saved"))
    version = dataset_import_hf(owner=owner, name="gsm", local_path=f"{imports.name}/saved",
                                prompt_column="question", gsm8k_column="answer")
    assert (version.source_format, version.row_count) == ("hf", 2)
    assert version.columns == ["question", "answer", "solution"]


def test_a_saved_dataset_dict_imports_the_split_asked_for(owner, imports):
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS),
                          "test": datasets.Dataset.from_list(ROWS[:1])}).save_to_disk(str(imports / "dict"))
    version = dataset_import_hf(owner=owner, name="gsm", local_path=f"{imports.name}/dict", split="test",
                                prompt_column="question")
    assert version.row_count == 1


def test_a_data_folder_is_loaded_with_load_dataset(owner, imports):
    (imports / "data").mkdir()
    (imports / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    version = dataset_import_hf(owner=owner, name="gsm", local_path=f"{imports.name}/data", prompt_column="question")
    assert version.row_count == 2 and version.columns == ["question", "answer"]


def test_a_bad_row_in_a_hf_dataset_names_the_row(owner, imports):
    import datasets

    datasets.Dataset.from_list(ROWS + [{"question": "", "answer": "#### 1"}]).save_to_disk(str(imports / "bad"))
    with pytest.raises(DatasetError) as caught:
        dataset_import_hf(owner=owner, name="gsm", local_path=f"{imports.name}/bad", prompt_column="question")
    assert caught.value.errors == ["row 3: column 'question' must be non-empty text"]
    assert not Dataset.objects.exists()


def test_a_path_outside_the_imports_folder_is_refused(owner):
    with pytest.raises(DatasetError) as caught:
        dataset_import_hf(owner=owner, name="x", local_path="../../etc")
    assert caught.value.errors == [f"path: only folders under {hf_import_root().resolve()} can be imported"]


def test_the_hub_form_needs_a_local_path_or_a_hub_id(owner_client):
    response = owner_client.post(reverse("dataset_upload"), {"source": "hf", "hf-name": "x"})
    assert response.status_code == 400
    assert "Give either a local path or a hub id." in response.content.decode()


def test_the_hub_form_refuses_a_malformed_hub_id(owner_client):
    response = owner_client.post(reverse("dataset_upload"), {"source": "hf", "hf-name": "x", "hf-hub_id": "a b/c"})
    assert "A hub id looks like" in response.content.decode()


def test_a_hub_id_on_an_offline_server_gets_a_clear_error(owner_client, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    response = owner_client.post(reverse("dataset_upload"), {
        "source": "hf", "hf-name": "gsm8k", "hf-hub_id": "openai/gsm8k", "hf-config": "main", "hf-split": "train",
        "hf-prompt_column": "question"})
    body = response.content.decode()
    assert response.status_code == 400
    assert "cannot reach the Hugging Face hub for &#x27;openai/gsm8k&#x27;: this server runs offline" in body
    assert not Dataset.objects.exists()
