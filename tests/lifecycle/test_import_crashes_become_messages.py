"""Published configs that crashed an import path (issue 27) now import, or are refused by name, before anything is
queued: an empty ``bf16:`` (a KeyError when TRL's config was built), a verl config composed onto verl's defaults
(``total_training_steps: null``: a NOT NULL error saving the run) and an open-r1 SFT recipe's ``warmup_ratio``
(accepted, then SFTConfig got warmup_steps twice when the run started)."""

import dataclasses

import pytest
import yaml

from runs.lifecycle.services import spec_problems
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.training_config import run_train_config
from runs.models import Run
from tests.api.conftest import api_client
from tests.lifecycle.published_corpus import corpus_mapping, corpus_owner_setup

pytestmark = pytest.mark.django_db


@pytest.fixture
def corpus_api(owner, tiny_model):
    corpus_owner_setup(owner)
    return api_client(owner)


def post(api, data: dict):
    text = yaml.safe_dump(data, sort_keys=False)
    return api.post("/api/runs", {"yaml": text, "queue_anyway": True}, content_type="application/json")


def test_an_empty_bf16_takes_its_default_with_a_note(corpus_api):
    data = corpus_mapping("open-r1_olympiccoder-7b_sft.yaml") | {"bf16": None}
    response = post(corpus_api, data)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.config["bf16"] == "auto"
    assert "bf16: left empty; the default 'auto' is used" in response.json()["import_notes"]


def test_a_verl_config_composed_onto_verls_defaults_imports_with_its_epochs(corpus_api):
    # the composed config's own reward is verl's data_source scorer: the built-in code_tests stands in for it here
    data = corpus_mapping("verl_generated_ppo_trainer.yaml") | {"reward_funcs": ["code_tests"]}
    assert data["trainer"]["total_training_steps"] is None and data["trainer"]["total_epochs"] == 15
    response = post(corpus_api, data)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    # 30 training rows, 1024 prompts a step: verl's dataloader keeps one (short) batch an epoch, 15 epochs
    assert run.trainer == "verl" and run.total_steps == run.config["max_steps"] == 15
    assert run.evaluation["eval_steps"] == 5  # trainer.test_freq
    assert run.requested_gpus == 8


def test_an_sft_recipes_warmup_ratio_is_its_warmup_steps(corpus_api, tmp_path):
    from workers.training.sft import sft_config

    data = corpus_mapping("open-r1_openr1-distill-7b_sft_distill.yaml") | {"max_steps": 100}
    response = post(corpus_api, data)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.config["warmup_steps"] == 3  # ceil(100 x 0.03), as transformers rounds a share of the steps
    assert "warmup_steps" not in run.config_extra
    train = run_train_config(run, slot_base=0, write_files=False)
    args = sft_config(dataclasses.replace(train, output_dir=str(tmp_path)))  # as the worker builds it
    assert args.warmup_steps == 3


def test_a_pass_through_field_the_run_also_sets_is_refused_before_queueing(owner, dataset_version, tiny_model):
    # an older import stored SFT's warmup_ratio as a pass-through warmup_steps: a retry or clone of it
    spec = RunSpec(
        name="old",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config={"warmup_steps": 0},
        config_extra={"warmup_steps": 0.1, "output_dir": "/tmp/x"},
        kind="sft",
    )
    problems = spec_problems(spec, owner=owner, queue_anyway=True)
    assert any(p.startswith("warmup_steps: given twice") for p in problems), problems
    assert any(p.startswith("output_dir: the training program sets it") for p in problems), problems
