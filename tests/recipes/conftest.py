import io
import json

import pytest


@pytest.fixture
def sft_version(owner):
    """A dataset version of worked answers (a completion column): the R1 and distill templates' second input."""
    from runs.datasets.services import dataset_import
    from workers.training.coldstart import cold_start_rows

    data = "".join(json.dumps(r) + "\n" for r in cold_start_rows(16)).encode()
    return dataset_import(owner=owner, name="worked", stream=io.BytesIO(data), source_name="w.jsonl")
