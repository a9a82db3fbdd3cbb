"""A LoRA run's final model is saved merged, with its adapter alone beside it (workers.training.train.save_final): the
Models page offers the adapter as a download of its own, a zip of what PEFT loads; a run without one answers 404, and
so does an outsider."""

import io
import zipfile

import pytest
from django.urls import reverse

from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db
ADAPTER = ("adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "tokenizer_config.json")


def files(folder, names):
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text(name)


def finished_run(owner, dataset_version, name, **config):
    run = make_run(owner, dataset_version, name=name, config=config)
    files(run.run_dir / "output" / "final", ("config.json", "model.safetensors", "tokenizer.json"))
    return run


@pytest.fixture
def lora_run(owner, dataset_version):
    run = finished_run(owner, dataset_version, "lora", use_peft=True, lora_r=8)
    files(run.run_dir / "output" / "adapter", (*ADAPTER, "README.md", "optimizer.pt"))
    return run


def test_the_adapter_downloads_as_a_zip_of_what_peft_loads(owner_client, lora_run):
    page = owner_client.get(reverse("models")).content.decode()
    url = reverse("model_adapter_download", args=[lora_run.pk])
    assert page.count(url) == 1  # on the final model's row only
    response = owner_client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    assert f'filename="run-{lora_run.pk}-adapter.zip"' in response["Content-Disposition"]
    names = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist()
    assert sorted(names) == [f"run-{lora_run.pk}-adapter/{name}" for name in sorted(ADAPTER)]
    listed = {(m["run_id"], m["key"]): m for m in owner_client.get("/api/models").json()}
    assert listed[lora_run.pk, "final"]["adapter_download"] == url


def test_a_run_without_an_adapter_has_no_adapter_download(owner_client, owner, dataset_version):
    run = finished_run(owner, dataset_version, "full")
    assert "adapter" not in owner_client.get(reverse("models")).content.decode().split("<table")[1]
    assert owner_client.get(reverse("model_adapter_download", args=[run.pk])).status_code == 404


def test_an_outsider_gets_404_for_the_adapter(outsider_client, lora_run):
    assert outsider_client.get(reverse("model_adapter_download", args=[lora_run.pk])).status_code == 404
