"""The recipes page preselects the demo's arithmetic prompts and the worked answers the demo now ships
(tests/datasets/test_dataset_demo.py), so the R1 template works as offered (it needed a dataset the demo lacked)."""

import io
import json

import pytest
from django.urls import reverse
from grpo_web_protocol.demo_data import arithmetic_rows, worked_answer_rows

from runs.datasets.demo import QUICK_START_DATASET, WORKED_ANSWERS_DATASET
from runs.datasets.services import dataset_import
from runs.models import Recipe

pytestmark = pytest.mark.django_db


def _import(owner, name, rows):
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return dataset_import(owner=owner, name=name, stream=io.BytesIO(data), source_name="rows.jsonl")


def test_the_r1_recipe_is_made_from_the_preselected_demo_datasets(owner_client, owner):
    prompts = _import(owner, QUICK_START_DATASET, arithmetic_rows(8))
    worked = _import(owner, WORKED_ANSWERS_DATASET, worked_answer_rows(8))
    _import(owner, "my upload", [{"prompt": f"q{i}", "answer": "1"} for i in range(4)])

    page = owner_client.get(reverse("recipes"))

    html = page.content.decode()
    assert f'<option value="{prompts.pk}" selected>' in html and f'<option value="{worked.pk}" selected>' in html
    response = owner_client.post(reverse("recipes"), {"template": "R1", "prompts": prompts.pk, "sft": worked.pk})
    assert response.status_code == 302, response.content.decode()
    recipe = Recipe.objects.get(owner=owner)
    assert recipe.stages[0]["dataset"] == worked.pk and recipe.stages[2]["mix"] == worked.pk
    assert recipe.stages[1]["dataset"] == prompts.pk
