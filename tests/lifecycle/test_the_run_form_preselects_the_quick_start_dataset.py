"""The run form preselects the dataset the README's quick start uses (the demo's arithmetic; its worked answers for an
SFT run), found by name: a dataset uploaded later does not take its place."""

import io
import json

import pytest
from django.urls import reverse
from grpo_web_protocol.demo_data import arithmetic_rows, worked_answer_rows

from runs.datasets.demo import QUICK_START_DATASET, WORKED_ANSWERS_DATASET
from runs.datasets.services import dataset_import

pytestmark = pytest.mark.django_db


def _import(owner, name, rows):
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return dataset_import(owner=owner, name=name, stream=io.BytesIO(data), source_name="rows.jsonl")


def _selected(response):
    return response.context["form"].initial["dataset_version"]


def test_the_quick_start_arithmetic_set_is_preselected_not_the_latest_upload(owner_client, owner):
    arithmetic = _import(owner, QUICK_START_DATASET, arithmetic_rows(8))
    worked = _import(owner, WORKED_ANSWERS_DATASET, worked_answer_rows(8))
    _import(owner, "my upload", [{"prompt": f"q{i}", "answer": "1"} for i in range(4)])

    response = owner_client.get(reverse("run_new"))

    assert _selected(response) == arithmetic.pk
    assert f'<option value="{arithmetic.pk}" selected>' in response.content.decode()
    assert _selected(owner_client.get(reverse("run_new") + "?kind=sft")) == worked.pk


def test_without_the_demo_sets_the_newest_version_is_preselected(owner_client, owner, dataset_version):
    newest = _import(owner, "my upload", [{"prompt": f"q{i}", "answer": "1"} for i in range(4)])
    assert _selected(owner_client.get(reverse("run_new"))) == newest.pk
