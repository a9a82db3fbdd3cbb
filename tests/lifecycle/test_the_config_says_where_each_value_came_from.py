"""Each value of a run's config says where it came from: the imported file, the run form, the trainer's default (a
field left out) or grpo-web's own default. The run page's Config tab and the exported YAML (as comments) show it,
and the run form keeps a file's value as the file's until someone edits it."""

import json
import re

import pytest
import yaml
from django.urls import reverse

from runs.lifecycle.forms import RunForm
from runs.lifecycle.trl_yaml import parse_run_yaml
from runs.models import Run
from tests.api.conftest import api_client
from tests.lifecycle.published_corpus import corpus_owner_setup

pytestmark = pytest.mark.django_db
FILE = (
    "model_name_or_path: tiny\ndataset_name: corpus\nreward_funcs: [code_tests]\nlearning_rate: 0.003\nmax_steps: 4\n"
)


@pytest.fixture
def run(owner, tiny_model):
    corpus_owner_setup(owner)  # its rows carry the tests code_tests runs
    response = api_client(owner).post(
        "/api/runs", {"yaml": FILE, "queue_anyway": True}, content_type="application/json"
    )
    assert response.status_code == 201, response.content
    return Run.objects.get(pk=response.json()["id"])


def test_the_run_page_shows_each_values_source(owner_client, run):
    page = owner_client.get(run.get_absolute_url()).content.decode()
    source = {
        name: re.search(rf'<tr data-field="{name}">.*?data-source="([^"]*)"', page, re.S).group(1)
        for name in ("learning_rate", "max_steps", "temperature", "bf16")
    }
    assert source == {
        "learning_rate": "file",
        "max_steps": "file",
        "temperature": "trainer default",
        "bf16": "grpo-web",
    }
    assert "output_dir" in page.split('id="set-for-every-run"')[1]


def test_the_exported_yaml_says_each_values_source_and_reads_back(owner, owner_client, run):
    text = owner_client.get(reverse("run_yaml", args=[run.pk])).content.decode()
    assert re.search(r"^learning_rate: 0\.003  # file$", text, re.M)
    assert re.search(r"^temperature: 1\.0  # trainer default$", text, re.M)
    assert re.search(r"^bf16: auto  # grpo-web$", text, re.M)
    back = parse_run_yaml(text, owner=owner)
    assert not back.errors and back.config == run.config
    assert yaml.safe_load(text)["learning_rate"] == 0.003


def test_the_form_keeps_a_files_value_as_the_files_until_it_is_edited(owner):
    corpus_owner_setup(owner)
    imported = parse_run_yaml(FILE, owner=owner)
    form = RunForm(owner=owner, imported=imported)
    data = {name: form.get_initial_for_field(field, name) for name, field in form.fields.items()}
    data = {k: v for k, v in data.items() if v is not None and v is not False and not callable(v)}
    data["config_extra"] = "{}"
    data["config_origin"] = json.dumps(data["config_origin"])
    data["builtin_code_tests"] = True
    data["max_steps"] = 5  # edited on the form
    sent = RunForm(data, owner=owner, imported=None)
    assert sent.is_valid(), sent.errors
    sources = sent.cleaned_data["config_sources"]
    assert sources["learning_rate"] == "file"
    assert sources["max_steps"] == "form"
    assert sources["temperature"] == "trainer default"
