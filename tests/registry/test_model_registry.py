"""The model registry: every model runs made (final outputs, checkpoints on disk) and every base model, with lineage;
a download holds the loadable files only; export copies them; an outsider sees nothing of it."""

import io
import zipfile
from pathlib import Path

import pytest
from django.urls import reverse

from runs.models import Run
from runs.registry.selectors import registry

pytestmark = pytest.mark.django_db


def _model_folder(path: Path):
    path.mkdir(parents=True)
    for name in (
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "optimizer.pt",
        "trainer_state.json",
    ):
        (path / name).write_text(name)


def _run(owner, version, name, model, kind="grpo"):
    return Run.objects.create(
        owner=owner,
        name=name,
        kind=kind,
        model=model,
        dataset_version=version,
        rewards=[],
        config={},
        total_steps=4,
        status=Run.Status.COMPLETED,
    )


@pytest.fixture
def lineage(owner, dataset_version):
    """tiny -> SFT run (final, checkpoint-2) -> GRPO run on the SFT's final (final)."""
    sft = _run(owner, dataset_version, "cold start", "tiny", kind="sft")
    _model_folder(sft.run_dir / "output" / "final")
    _model_folder(sft.run_dir / "output" / "checkpoint-2")
    grpo = _run(owner, dataset_version, "reasoning", str(sft.run_dir / "output" / "final"))
    _model_folder(grpo.run_dir / "output" / "final")
    return sft, grpo


def test_every_made_model_and_base_model_is_listed_with_its_lineage(owner, lineage):
    sft, grpo = lineage
    entries = {(e.run.pk if e.run else None, e.key): e for e in registry(owner)}
    assert set(entries) == {(sft.pk, "final"), (sft.pk, "checkpoint-2"), (grpo.pk, "final"), (None, "tiny")}
    assert entries[grpo.pk, "final"].parent is entries[sft.pk, "final"]
    assert entries[sft.pk, "final"].parent is entries[None, "tiny"]
    assert entries[sft.pk, "final"].used_by == [grpo]
    assert entries[None, "tiny"].used_by == [sft]


def test_the_models_page_offers_each_model_as_a_base(owner_client, lineage):
    sft, grpo = lineage
    page = owner_client.get(reverse("models")).content.decode()
    assert page.count("<tr data-model=") == 3
    assert f'data-parent="{sft.pk}-final"' in page
    assert "?kind=sft&model=" in page and reverse("model_download", args=[grpo.pk, "final"]) in page


def test_a_download_holds_weights_config_and_tokenizer_only(owner_client, lineage):
    sft, _ = lineage
    response = owner_client.get(reverse("model_download", args=[sft.pk, "checkpoint-2"]))
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).namelist()
    folder = f"run-{sft.pk}-checkpoint-2/"
    assert sorted(names) == [
        folder + n for n in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
    ]


def test_export_copies_the_model_to_the_exports_folder(owner_client, owner, lineage, settings, tmp_path):
    settings.GRPO_EXPORT_DIR = tmp_path / "exports"
    _, grpo = lineage
    response = owner_client.post(reverse("model_export", args=[grpo.pk, "final"]))
    assert response.status_code == 302
    folder = tmp_path / "exports" / owner.username / f"run-{grpo.pk}-final"
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


def test_an_outsider_gets_404_and_an_empty_registry(outsider_client, outsider, lineage):
    sft, _ = lineage
    assert registry(outsider) == []
    assert outsider_client.get(reverse("model_download", args=[sft.pk, "final"])).status_code == 404
    assert outsider_client.post(reverse("model_export", args=[sft.pk, "final"])).status_code == 404
    assert "cold start" not in outsider_client.get(reverse("models")).content.decode()


def test_a_model_key_that_is_not_on_disk_is_404(owner_client, lineage):
    sft, _ = lineage
    for key in ("checkpoint-9", "..", "final%2F..%2F.."):
        assert owner_client.get(f"/models/{sft.pk}/{key}/download/").status_code == 404
