"""Hugging Face datasets: a local folder (save_to_disk, or a data folder) under the imports folder, or a hub id
when the server is online. No test downloads anything."""

import json
import shutil
import uuid

import pytest
from django.urls import reverse

from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import_hf, dataset_import_job_run, hf_import_root
from runs.models import Dataset, DatasetImport
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db

ROWS = [
    {"question": "Tom has 3 apples and eats 1. How many are left?", "answer": "3 - 1 = 2\n#### 2"},
    {"question": "What is 6 / 2?", "answer": "6 / 2 = 3\n#### 3"},
]


@pytest.fixture
def imports():
    folder = hf_import_root() / f"test-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder)


def test_a_dataset_saved_with_save_to_disk_is_imported(owner, imports):
    import datasets

    datasets.Dataset.from_list(ROWS).save_to_disk(str(imports / "saved"))
    version = dataset_import_hf(
        owner=owner, name="gsm", local_path=f"{imports.name}/saved", prompt_column="question", gsm8k_column="answer"
    )
    assert (version.source_format, version.row_count) == ("hf", 2)
    assert version.columns == ["question", "answer", "solution"]


def test_a_saved_dataset_dict_imports_the_split_asked_for(owner, imports):
    import datasets

    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS), "test": datasets.Dataset.from_list(ROWS[:1])}
    ).save_to_disk(str(imports / "dict"))
    version = dataset_import_hf(
        owner=owner, name="gsm", local_path=f"{imports.name}/dict", split="test", prompt_column="question"
    )
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


# --- the background job, from the page ----------------------------------------------------------------------------


def test_the_form_lists_the_import_roots_and_offers_what_is_under_them(owner_client, imports):
    (imports / "data").mkdir()
    (imports / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    page = owner_client.get(reverse("dataset_upload")).content.decode()
    assert str(hf_import_root()) in page
    assert f'value="{imports / "data"}"' in page and f"{hf_import_root().name}/{imports.name}/data/" in page


def test_a_local_import_from_the_page_runs_as_a_job_and_lands_as_a_version(owner_client, owner, imports):
    (imports / "data").mkdir()
    (imports / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    response = owner_client.post(
        reverse("dataset_upload"),
        {
            "source": "hf",
            "hf-name": "gsm",
            "hf-local_path": str(imports / "data"),
            "hf-prompt_column": "question",
            "hf-gsm8k_column": "",
        },
    )
    job = DatasetImport.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("dataset_import_detail", args=[job.pk])
    assert owner_client.get(reverse("dataset_import_json", args=[job.pk])).json()["status"] == "queued"
    dataset_import_job_run(job_id=job.pk)  # what the worker's task does
    state = owner_client.get(reverse("dataset_import_json", args=[job.pk])).json()
    version = Dataset.objects.get(name="gsm").latest_version
    assert state == {
        "status": "completed",
        "progress": "",
        "rows_done": 2,
        "errors": [],
        "finished": True,
        "version_url": version.get_absolute_url(),
    }
    assert dataset_import_job_run(job_id=job.pk) is None  # a redelivered message changes nothing


def test_a_path_outside_the_import_roots_is_refused_before_any_job(owner_client):
    response = owner_client.post(reverse("dataset_upload"), {"source": "hf", "hf-name": "x", "hf-local_path": "/etc"})
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    assert not DatasetImport.objects.exists()


def test_a_hub_id_on_an_offline_server_is_refused_before_any_job(owner_client, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    response = owner_client.post(
        reverse("dataset_upload"),
        {
            "source": "hf",
            "hf-name": "gsm8k",
            "hf-hub_id": "openai/gsm8k",
            "hf-config": "main",
            "hf-split": "train",
            "hf-prompt_column": "question",
        },
    )
    assert response.status_code == 400
    assert (
        "hub id: this server runs offline (HF_HUB_OFFLINE=1) and cannot fetch &#x27;openai/gsm8k&#x27; from the "
        f"Hugging Face hub; put a copy in an import folder ({hf_import_root()}) and import it by Local path"
    ) in response.content.decode()
    assert not DatasetImport.objects.exists() and not Dataset.objects.exists()


def test_an_outsider_gets_404_on_someone_elses_import(outsider_client, owner):
    job = DatasetImport.objects.create(owner=owner, name="x", source={"hub_id": "a/b"})
    assert outsider_client.get(reverse("dataset_import_detail", args=[job.pk])).status_code == 404
    assert outsider_client.get(reverse("dataset_import_json", args=[job.pk])).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_the_import_started_from_the_page(celery_worker, owner_client, imports):
    (imports / "data").mkdir()
    (imports / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    owner_client.post(
        reverse("dataset_upload"),
        {
            "source": "hf",
            "hf-name": "via worker",
            "hf-local_path": str(imports / "data"),
            "hf-prompt_column": "question",
        },
    )
    job = DatasetImport.objects.get()
    wait_for(lambda: job.refresh_from_db() or job.is_finished, timeout=60, what="the worker to run the import")
    assert job.status == DatasetImport.Status.COMPLETED and job.version.row_count == 2
