"""Versions never change: uploading again makes a new version, runs keep the version they were started on."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from runs.models import Dataset, DatasetVersion, Run

pytestmark = pytest.mark.django_db


def _file(rows, name="rows.jsonl"):
    return SimpleUploadedFile(name, "".join(json.dumps(r) + "\n" for r in rows).encode())


def test_uploading_to_a_dataset_again_creates_its_next_version(owner_client, dataset_version):
    dataset = dataset_version.dataset
    response = owner_client.post(
        reverse("dataset_upload_version", args=[dataset.pk]), {"file": _file([{"prompt": "new?", "answer": "1"}])}
    )
    assert response.status_code == 302
    assert list(dataset.versions.values_list("number", "row_count")) == [(2, 1), (1, 64)]
    assert response["Location"] == reverse("dataset_version", args=[dataset.pk, 2])


def test_the_earlier_version_keeps_its_rows_and_page(owner_client, dataset_version):
    dataset = dataset_version.dataset
    owner_client.post(
        reverse("dataset_upload_version", args=[dataset.pk]), {"file": _file([{"prompt": "new?", "answer": "1"}])}
    )
    page = owner_client.get(reverse("dataset_version", args=[dataset.pk, 1])).content.decode()
    assert "64 rows" in page and "new?" not in page


def test_a_run_keeps_the_version_it_was_started_on(owner_client, owner, dataset_version):
    run = Run.objects.create(
        owner=owner, name="r", model="tiny", dataset_version=dataset_version, rewards=[], config={}, total_steps=1
    )
    owner_client.post(
        reverse("dataset_upload_version", args=[dataset_version.dataset.pk]), {"file": _file([{"prompt": "new?"}])}
    )
    run.refresh_from_db()
    assert run.dataset_version.number == 1


def test_an_outsider_cannot_upload_a_version_of_someone_elses_dataset(outsider_client, dataset_version):
    response = outsider_client.post(
        reverse("dataset_upload_version", args=[dataset_version.dataset.pk]), {"file": _file([{"prompt": "mine now"}])}
    )
    assert response.status_code == 404
    assert DatasetVersion.objects.count() == 1


def test_an_outsider_gets_404_on_a_version_page(outsider_client, dataset_version):
    url = reverse("dataset_version", args=[dataset_version.dataset.pk, 1])
    assert outsider_client.get(url).status_code == 404


def test_a_version_number_that_does_not_exist_is_404(owner_client, dataset_version):
    assert owner_client.get(reverse("dataset_version", args=[dataset_version.dataset.pk, 9])).status_code == 404


def test_an_upload_over_the_limit_is_stopped_while_it_streams(owner_client, settings):
    settings.GRPO_MAX_UPLOAD_BYTES = 1000
    big = _file([{"prompt": "x" * 100}] * 50)
    response = owner_client.post(reverse("dataset_upload"), {"name": "big", "file": big})
    assert response.status_code == 400
    assert "the file is larger than the upload limit (1000 bytes)" in response.content.decode()
    assert not Dataset.objects.exists()


def test_an_upload_page_error_names_the_line_and_column_escaped(owner_client):
    rows = [{"prompt": "ok", "<i>x</i>": 1}, {"prompt": "ok", "<i>x</i>": "one"}]
    response = owner_client.post(reverse("dataset_upload"), {"name": "d", "file": _file(rows)})
    body = response.content.decode()
    assert response.status_code == 400
    assert "line 2: column &#x27;&lt;i&gt;x&lt;/i&gt;&#x27; holds text here but a number on line 1" in body
    assert "<i>x</i>" not in body


def test_an_outsider_gets_404_on_the_new_version_page(outsider_client, dataset_version):
    assert outsider_client.get(reverse("dataset_upload_version", args=[dataset_version.dataset.pk])).status_code == 404


def test_the_newest_version_is_the_latest_and_versions_list_newest_first(owner_client, dataset_version):
    dataset = dataset_version.dataset
    for question in ("second?", "third?"):
        owner_client.post(
            reverse("dataset_upload_version", args=[dataset.pk]), {"file": _file([{"prompt": question, "answer": "1"}])}
        )
    newest = owner_client.get(reverse("dataset_version", args=[dataset.pk, 3])).content.decode()
    assert "not the latest" not in newest
    listed = newest.split('id="versions"', 1)[1].split("</ul>", 1)[0]
    assert listed.index(">v3") < listed.index(">v2") < listed.index(">v1")
    oldest = owner_client.get(reverse("dataset_version", args=[dataset.pk, 1])).content.decode()
    assert "not the latest" in oldest
