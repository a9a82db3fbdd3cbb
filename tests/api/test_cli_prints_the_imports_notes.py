"""`grpo-web submit` prints what the import did with the keys it did not take as they are (issue 27): the notes
POST /api/runs returns, one line each, before the queued run."""

import io
import json

import pytest

from runs.accounts.services import token_create
from runs.datasets.services import dataset_import
from runs.models import Run
from tests.api.test_cli_client import cli

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_submit_prints_each_note_of_the_import(web_server, owner, tiny_model, tmp_path):
    rows = [{"prompt": f"q{i}", "completion": f"a{i}"} for i in range(8)]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    dataset_import(owner=owner, name="pairs", stream=io.BytesIO(data), source_name="pairs.jsonl")
    _, token = token_create(owner=owner, name="cli", scope="write")
    config = tmp_path / "sft.yaml"
    config.write_text(
        "trainer: sft\nmodel_name_or_path: tiny\ndataset_name: pairs\nmax_steps: 10\nwarmup_ratio: 0.1\n"
        "wandb_project: open-r1\nbf16:\n"
    )
    submitted = cli(web_server, token, "submit", str(config))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run = Run.objects.get()
    lines = submitted.stdout.splitlines()
    assert "note: bf16: left empty; the default 'auto' is used" in lines
    assert any(line.startswith("note: wandb_project: Weights & Biases settings; not applied") for line in lines)
    assert any(line.startswith("note: warmup_ratio:") and "warmup_steps: 1" in line for line in lines)
    assert lines[-1].startswith(f"queued run {run.pk}: ")
