"""Periodic evaluation settings travel with a run: the run form (checked against the dataset's split), YAML out and
in, clones, and the training program's config (the eval split written beside the train split)."""

import json

import pytest
from django.urls import reverse

from rewards.models import RewardFunction
from runs.lifecycle.forms import RunForm
from runs.lifecycle.training_config import run_train_config
from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Run
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db

EVAL = {
    "eval_steps": 5,
    "eval_num_samples": 3,
    "eval_max_prompts": 10,
    "eval_temperature": 0.7,
    "eval_max_new_tokens": 0,
    "eval_solved_by": "accuracy",
    "eval_threshold": 1.0,
}


def _form_data(owner, version, **fields):
    form = RunForm(owner=owner)
    data = {name: value for name, value in form.initial.items() if value is not None}
    data.update({f.name: f.initial for f in form if f.initial is not None and f.name not in data})
    rf = RewardFunction.objects.get(owner=owner, name="accuracy")
    data.update(
        {
            "name": "with eval",
            "model": "tiny",
            "dataset_version": version.pk,
            f"reward_{rf.pk}": "on",
            f"weight_{rf.pk}": 1.0,
            f"version_{rf.pk}": rf.latest_version.number,
            **fields,
        }
    )
    return {k: ("on" if v is True else v) for k, v in data.items() if v is not False}


def test_the_form_refuses_eval_steps_without_an_eval_split(owner, dataset_version):
    form = RunForm(_form_data(owner, dataset_version, eval_steps=5), owner=owner)
    assert not form.is_valid()
    assert "no eval split" in form.errors["eval_steps"][0]
    form = RunForm(_form_data(owner, dataset_version, eval_steps=0), owner=owner)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["evaluation"]["eval_steps"] == 0


def test_the_form_takes_eval_settings_and_blank_means_the_default(owner, eval_version):
    form = RunForm(
        _form_data(owner, eval_version, eval_steps=4, eval_num_samples="", eval_solved_by=" accuracy "), owner=owner
    )
    assert form.is_valid(), form.errors
    assert form.cleaned_data["evaluation"] == {
        **EVAL,
        "eval_steps": 4,
        "eval_num_samples": 4,
        "eval_max_prompts": 32,
        "eval_temperature": 1.0,
    }


def test_yaml_round_trip_and_clone_keep_the_eval_settings(owner, eval_version):
    run = make_run(owner, eval_version, evaluation=EVAL)
    text = run_yaml(run)
    assert "eval_steps: 5" in text and "eval_num_samples: 3" in text
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == [] and imported.evaluation == EVAL
    assert RunForm(owner=owner, run=run).initial["eval_steps"] == 5


def test_the_training_config_carries_the_eval_split(owner, eval_version, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    run = make_run(owner, eval_version, evaluation=EVAL)
    config = run_train_config(run, slot_base=100)
    assert config.evaluation.eval_steps == 5 and config.evaluation.eval_num_samples == 3
    assert config.eval_source == "arithmetic"
    eval_rows = [json.loads(line) for line in open(config.eval_dataset_path)]
    train_rows = [json.loads(line) for line in open(config.dataset_path)]
    assert len(eval_rows) == eval_version.eval_rows and len(train_rows) == eval_version.train_rows
    assert len(eval_rows) + len(train_rows) == 64 and {"prompt", "answer"} <= set(eval_rows[0])
    # without eval_steps no eval file is written nor read
    plain = make_run(owner, eval_version, name="plain")
    assert run_train_config(plain, slot_base=100).eval_dataset_path is None


def test_the_run_form_page_shows_the_evaluation_fields(owner_client):
    page = owner_client.get(reverse("run_new")).content.decode()
    for name in EVAL:
        assert f'name="{name}"' in page
    assert Run.objects.count() == 0
