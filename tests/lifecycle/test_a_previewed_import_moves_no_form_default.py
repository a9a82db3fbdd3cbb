"""Previewing an open-r1 config (its prompt column and system prompt) makes a mapped version of the dataset it names,
for that import alone: the run form (GRPO and SFT) and the recipe form keep offering what they offered before, so the
next run does not train on the recipe's system prompt unasked. Nor does a teammate sharing a run move them."""

import io
import json

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from grpo_web_protocol.demo_data import arithmetic_rows, worked_answer_rows

from grpo_web.sharing import share_update
from runs.datasets.demo import QUICK_START_DATASET, WORKED_ANSWERS_DATASET
from runs.datasets.services import dataset_import
from runs.models import DatasetVersion, Run
from tests.lifecycle.test_open_r1_import import QWEN_DEMO

pytestmark = pytest.mark.django_db


def _import(owner, name, rows):
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return dataset_import(owner=owner, name=name, stream=io.BytesIO(data), source_name="rows.jsonl")


def defaults(client) -> dict:
    recipes = client.get(reverse("recipes")).context
    return {
        "run": client.get(reverse("run_new")).context["form"].initial["dataset_version"],
        "sft run": client.get(reverse("run_new") + "?kind=sft").context["form"].initial["dataset_version"],
        "recipe prompts": recipes["default_prompts"] and recipes["default_prompts"].pk,
        "recipe worked answers": recipes["default_sft"] and recipes["default_sft"].pk,
    }


def preview(client, dataset: str) -> None:
    """The import page's preview: the form filled from the config, nothing started."""
    text = QWEN_DEMO.replace("open-r1/OpenR1-Math-220k", f'"{dataset}"').replace("column: problem", "column: prompt")
    answer = client.post(reverse("run_import"), {"yaml": text})
    assert b"made version 2 of" in answer.content, answer.content.decode()[-3000:]


def test_previewing_an_open_r1_config_leaves_every_form_default(owner_client, owner):
    arithmetic = _import(owner, QUICK_START_DATASET, arithmetic_rows(8))
    worked = _import(owner, WORKED_ANSWERS_DATASET, worked_answer_rows(8))
    before = defaults(owner_client)
    assert before == {
        "run": arithmetic.pk,
        "sft run": worked.pk,
        "recipe prompts": arithmetic.pk,
        "recipe worked answers": worked.pk,
    }

    preview(owner_client, QUICK_START_DATASET)
    preview(owner_client, WORKED_ANSWERS_DATASET)

    made = DatasetVersion.objects.filter(provenance__kind="import")
    assert made.count() == 2 and all(v.system_prompt.startswith("You are a helpful") for v in made)
    assert not Run.objects.exists()
    assert defaults(owner_client) == before
    page = owner_client.get(reverse("run_new")).content.decode()
    assert f'<option value="{arithmetic.pk}" selected>' in page


def test_without_the_demo_sets_a_preview_or_a_shared_run_leaves_the_newest_upload(owner_client, owner, member):
    upload = _import(owner, "my upload", [{"prompt": f"q{i}", "answer": "1"} for i in range(4)])
    assert defaults(owner_client)["run"] == upload.pk

    preview(owner_client, "my upload")
    # a teammate's run, shared with the owner, brings its dataset into what the owner may pick: not as the default
    theirs = _import(member, "their set", [{"prompt": f"t{i}", "answer": "2"} for i in range(4)])
    team = Group.objects.create(name="lab")
    team.user_set.add(owner, member)
    run = Run.objects.create(owner=member, name="theirs", model="tiny", dataset_version=theirs, config={}, rewards=[])
    share_update(obj=run, user=member, team_id=team.pk, access="read")
    assert (
        owner_client.get(reverse("run_new"))
        .context["form"]
        .fields["dataset_version"]
        .queryset.filter(pk=theirs.pk)
        .exists()
    )
    assert defaults(owner_client)["run"] == upload.pk
    assert defaults(owner_client)["recipe prompts"] == upload.pk
