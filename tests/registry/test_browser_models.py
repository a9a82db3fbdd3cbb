"""In chromium: an SFT run's final model appears on the Models page with its lineage, and its download is a zip a
browser saves, holding the weights, config and tokenizer."""

import zipfile

import pytest
from grpo_web_protocol.config import SFT_FIELDS

from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from tests.conftest import log_in, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_made_model_is_listed_and_downloads(web_server, celery_worker, owner, page, tmp_path):
    import io
    import json

    from runs.datasets.services import dataset_import
    from workers.training.coldstart import cold_start_rows

    data = "".join(json.dumps(r) + "\n" for r in cold_start_rows(16)).encode()
    version = dataset_import(owner=owner, name="worked", stream=io.BytesIO(data), source_name="w.jsonl")
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="cold start",
            model="tiny",
            dataset_version=version,
            rewards=[],
            kind="sft",
            config={
                **{k: f.default for k, f in SFT_FIELDS.items()},
                "max_steps": 2,
                "save_steps": 0,
                "per_device_train_batch_size": 8,
            },
        ),
    )
    wait_for(lambda: (run.refresh_from_db(), run.is_finished)[1], timeout=180, what="the SFT run to finish")
    assert run.status == "completed", run.error + run.log_tail

    log_in(page, web_server)
    page.click("nav >> text=Models")
    row = page.locator(f"#made-models tr[data-model='{run.pk}-final']")
    assert "cold start" in row.inner_text() and "tiny" in row.locator(".lineage").inner_text()
    assert page.locator("#base-models").inner_text().count("tiny") >= 1
    with page.expect_download() as info:
        row.locator("text=Download").click()
    saved = tmp_path / "model.zip"
    info.value.save_as(saved)
    names = {n.split("/", 1)[1] for n in zipfile.ZipFile(saved).namelist()}
    assert {"model.safetensors", "config.json", "tokenizer_config.json"} <= names
    assert not any(n.startswith(("optimizer", "trainer_state")) for n in names)
