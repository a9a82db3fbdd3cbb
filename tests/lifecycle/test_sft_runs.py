"""SFT runs as a run kind: the form under SFTConfig's names, what it refuses, YAML both ways, the run page."""

import io
import json
import re

import pytest
from django.urls import reverse
from grpo_web_protocol.config import SFT_FIELDS, SFTFields
from grpo_web_protocol.trl_fields import SFT_CONFIG_FIELDS

from runs.lifecycle.services import RunRefused, run_create
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Run
from tests.conftest import run_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def sft_version(owner):
    from runs.datasets.services import dataset_import
    from workers.training.coldstart import cold_start_rows

    data = "".join(json.dumps(r) + "\n" for r in cold_start_rows(32)).encode()
    return dataset_import(owner=owner, name="worked answers", stream=io.BytesIO(data), source_name="sft.jsonl")


def _sft_form_data(owner, version):
    from runs.lifecycle.forms import RunForm

    form = RunForm(owner=owner, kind="sft")
    data = {name: form.get_initial_for_field(field, name) for name, field in form.fields.items()}
    data.pop("config_extra", None)
    data = {k: v for k, v in data.items() if v is not None and v != "" and v is not False and not callable(v)}
    return {**data, "dataset_version": version.pk, "name": "cold start"}


def test_the_sft_fields_are_sftconfig_names():
    from trl import SFTConfig

    assert set(SFT_FIELDS) <= SFT_CONFIG_FIELDS
    import dataclasses

    assert SFT_CONFIG_FIELDS == {f.name for f in dataclasses.fields(SFTConfig)}


def test_the_sft_form_shows_sftconfig_and_no_grpo_field(owner_client):
    page = owner_client.get(reverse("run_new") + "?kind=sft").content.decode()
    assert "New SFT run" in page and "SFTConfig" in page
    assert 'name="completion_only_loss"' in page and 'name="max_length"' in page
    assert 'name="num_generations"' not in page and 'name="beta"' not in page


def test_the_sft_form_starts_an_sft_run_without_rewards(owner_client, owner, sft_version, tiny_model, monkeypatch):
    monkeypatch.setattr("runs.lifecycle.services._enqueue", lambda run: None)
    data = _sft_form_data(owner, sft_version)
    response = owner_client.post(reverse("run_new") + "?kind=sft", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    run = Run.objects.get(name="cold start")
    assert run.kind == "sft" and run.rewards == [] and run.total_steps == SFTFields().max_steps
    assert set(run.config) == set(SFT_FIELDS) and run.config["completion_only_loss"] is True


def test_an_sft_run_on_rows_without_completions_is_refused(owner, dataset_version):
    with pytest.raises(RunRefused, match="neither a 'completion' column"):
        run_create(
            owner=owner,
            spec=RunSpec(
                name="x", model="tiny", dataset_version=dataset_version, rewards=[], config={"max_steps": 3}, kind="sft"
            ),
        )


def test_an_sft_run_with_evaluations_needs_rewards_to_score_them(owner, sft_version):
    with pytest.raises(RunRefused, match="rewards: pick the reward functions that score the evaluations"):
        run_create(
            owner=owner,
            spec=RunSpec(
                name="x",
                model="tiny",
                dataset_version=sft_version,
                rewards=[],
                config={"max_steps": 3},
                kind="sft",
                evaluation={"eval_steps": 1},
            ),
        )


def test_a_grpo_field_in_an_sft_config_is_refused_by_name(owner, sft_version):
    with pytest.raises(RunRefused, match="num_generations"):
        run_create(
            owner=owner,
            spec=RunSpec(
                name="x",
                model="tiny",
                dataset_version=sft_version,
                rewards=[],
                config={"max_steps": 3, "num_generations": 4},
                kind="sft",
            ),
        )


def test_an_sft_run_exports_and_imports_as_sftconfig_yaml(owner, sft_version, tiny_model, monkeypatch):
    monkeypatch.setattr("runs.lifecycle.services._enqueue", lambda run: None)
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="cold start",
            model="tiny",
            dataset_version=sft_version,
            rewards=[],
            config={**{k: f.default for k, f in SFT_FIELDS.items()}, "max_steps": 7},
            kind="sft",
        ),
    )
    text = run_yaml(run)
    assert text.startswith("# grpo-web run") and "SFTConfig" in text and "trainer: sft" in text
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == [] and imported.kind == "sft"
    assert imported.config == run.config and imported.dataset_version == sft_version
    # an SFTConfig field the form lacks passes through; a GRPO-only field is an error naming the key
    imported = parse_run_yaml(text + "neftune_noise_alpha: 5\nnum_generations: 4\n", owner=owner)
    assert imported.extra == {"neftune_noise_alpha": 5}
    assert imported.errors == ["num_generations: not a SFTConfig field nor a grpo-web key"]


def test_the_sft_run_page_names_its_trainer_and_hides_rollouts(owner_client, owner, sft_version):
    run = Run.objects.create(
        owner=owner,
        name="cold start",
        kind="sft",
        model="tiny",
        dataset_version=sft_version,
        rewards=[],
        config={k: f.default for k, f in SFT_FIELDS.items()},
        total_steps=30,
    )
    page = owner_client.get(run.get_absolute_url()).content.decode()
    assert 'id="run-kind">SFT<' in page and "SFTTrainer" in page
    # no Rollouts tab, and its panel (the group view and the inspection links) stays hidden
    assert 'id="tab-rollouts"' not in page
    assert re.search(r'id="panel-rollouts"[^>]*hidden', page)
    clone = owner_client.get(reverse("run_clone", args=[run.pk])).content.decode()
    assert 'name="completion_only_loss"' in clone and 'name="num_generations"' not in clone


def test_the_grpo_form_is_unchanged(owner_client, owner):
    data = run_form_data(owner)
    assert "num_generations" in data and "completion_only_loss" not in data
