"""A published config that leaves a field out trains with TRL's default for it (issue 27): the run stores it, with
"trainer default" as where it came from, and the GRPOConfig / SFTConfig the worker builds holds what TRL's own config
holds when it is not given. TRL's values are read from TRL (its dataclass defaults, and a config it builds), never
written here. max_steps left out is TRL's -1: num_train_epochs (3) over the training prompts, as steps."""

import dataclasses

import pytest
import yaml
from grpo_web_protocol.config import GRPO_FIELDS, GRPO_WEB_DEFAULTS, PEFT_FIELDS, SFT_FIELDS

from runs.lifecycle.training_config import run_train_config
from runs.models import Run
from tests.api.conftest import api_client
from tests.lifecycle.published_corpus import corpus_mapping, corpus_owner_setup

pytestmark = pytest.mark.django_db
SET_PER_RUN = {"max_steps", "save_steps"}  # max_steps: resolved from the epochs; save_steps: trainer_args' own switch


@pytest.fixture
def corpus_api(owner, tiny_model, trl_defaults):
    corpus_owner_setup(owner)
    return api_client(owner)


def imported(api, name: str, **more) -> Run:
    # the trusted built-in code_tests stands in for the file's reward: no sandbox worker to check a copy of it
    reward = {"reward_funcs": ["code_tests"]} if corpus_mapping(name).get("reward_funcs") else {}
    text = yaml.safe_dump(corpus_mapping(name) | reward | more, sort_keys=False)
    response = api.post("/api/runs", {"yaml": text, "queue_anyway": True}, content_type="application/json")
    assert response.status_code == 201, response.content
    return Run.objects.get(pk=response.json()["id"])


def as_built(run: Run, tmp_path):
    """The TRL config the worker builds for ``run``."""
    from workers.training.sft import sft_config
    from workers.training.train import grpo_config

    train = dataclasses.replace(run_train_config(run, slot_base=0, write_files=False), output_dir=str(tmp_path))
    return (sft_config if run.is_sft else grpo_config)(train)


def omitted(fields, data: dict) -> list[str]:
    return [n for n in fields if n not in data and n not in GRPO_WEB_DEFAULTS and n not in PEFT_FIELDS]


def test_a_grpo_config_that_omits_fields_trains_with_grpoconfigs_defaults(corpus_api, tmp_path):
    from trl import GRPOConfig

    run = imported(corpus_api, "trl_docs_clis_grpo_config.yaml", learning_rate=3.0e-6)
    declared = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    left_out = omitted(GRPO_FIELDS, {"learning_rate": 1})
    assert {"max_completion_length", "per_device_train_batch_size", "temperature", "beta"} <= set(left_out)
    for name in set(left_out) - SET_PER_RUN:
        assert run.config[name] == declared[name], name
    assert {run.config_sources[n] for n in left_out} == {"trainer default"}
    assert run.config["learning_rate"] == 3.0e-6 and run.config_sources["learning_rate"] == "file"
    assert run.config_sources["bf16"] == run.config_sources["save_total_limit"] == "grpo-web"

    args = as_built(run, tmp_path)
    reference = GRPOConfig(output_dir=str(tmp_path / "reference"), use_cpu=True)
    for name in set(left_out) - SET_PER_RUN:
        assert getattr(args, name) == getattr(reference, name), name
    assert args.save_steps == reference.save_steps
    # max_steps -1: TRL trains num_train_epochs; the run counts the steps that takes
    prompts_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps // args.num_generations
    work = run.dataset_version.train_rows * reference.num_train_epochs
    assert (run.total_steps - 1) * prompts_per_step < work <= run.total_steps * prompts_per_step
    assert args.max_steps == run.total_steps and run.config_sources["max_steps"] == "trainer default"


def test_an_sft_config_that_omits_fields_trains_with_sftconfigs_defaults(corpus_api, tmp_path):
    from trl import SFTConfig

    run = imported(corpus_api, "trl_docs_clis_sft_config_num_processes.yaml")
    assert run.is_sft
    declared = {f.name: f.default for f in dataclasses.fields(SFTConfig)}
    left_out = omitted(SFT_FIELDS, {})
    for name in set(left_out) - SET_PER_RUN:
        assert run.config[name] == declared[name], name
    assert {run.config_sources[n] for n in left_out} == {"trainer default"}

    args = as_built(run, tmp_path)
    reference = SFTConfig(output_dir=str(tmp_path / "reference"), use_cpu=True)
    for name in set(left_out) - SET_PER_RUN:
        assert getattr(args, name) == getattr(reference, name), name
    rows_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * run.requested_gpus
    work = run.dataset_version.train_rows * reference.num_train_epochs
    assert (run.total_steps - 1) * rows_per_step < work <= run.total_steps * rows_per_step
