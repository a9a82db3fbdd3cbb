"""The field's published configs import as published (issue 27): open-r1's GRPO and SFT recipes, Oumi's TRL and verl
GRPO examples and TRL_SFT recipes, verl's GRPO launch scripts (and one composed onto verl's defaults) and TRL's CLI example, kept unchanged
in published_configs/ (what the tests swap is listed in tests/lifecycle/published_corpus.py). Each goes through the
import the API uses and the check made before a run is queued (and through POST /api/runs itself where that needs no
sandbox worker: the SFT recipes and the refused files); none is refused but for the reasons given per file
below; TRL builds its config from each accepted TRL run as the worker will; each verl run gives verl back the
batches its file set."""

import dataclasses

import pytest
import yaml
from grpo_web_protocol.verl_keys import flatten, overrides

from runs.lifecycle.services import spec_problems
from runs.lifecycle.spec import RunSpec, api_import
from runs.lifecycle.training_config import run_train_config
from tests.api.conftest import api_client
from tests.lifecycle.published_corpus import CORPUS, corpus_files, corpus_mapping, corpus_owner_setup, corpus_yaml

pytestmark = pytest.mark.django_db

# file -> why it is refused (a fragment of the refusal): what the file itself says, refused as its trainer would
REFUSED = {
    # open-r1 trains these on 7 processes (16 x 7 x 4 = 448 completions, 32 groups of 14); on one process the
    # generation batch is 64, not a multiple of num_generations 14: TRL's GRPOConfig refuses it there too
    "open-r1_qwen2.5-1.5b_grpo_demo_code.yaml": "per_device_train_batch_size: the generation batch (16 x 4",
    "open-r1_qwen2.5-1.5b_grpo_demo_code_ioi.yaml": "per_device_train_batch_size: the generation batch (16 x 4",
    # 2 completions a step on one process, num_generations 4 (Oumi launches it on more GPUs): TRL refuses it too
    "oumi_letter_counting_grpo.yaml": "per_device_train_batch_size: the generation batch (2 x 1",
    # the same, with TRL's default num_generations 8
    "oumi_grpo_tldr.yaml": "per_device_train_batch_size: the generation batch (2 x 1",
    # `vllm_device: auto` (TRL's server mode, on a GPU of its own) with no GPU asked for: TRL's weight sync into the
    # server is NCCL, which needs GPUs; asked for with `requested_gpus`, it imports
    "open-r1_qwen2.5-coder-7b_grpo_codeforces.yaml": "vllm_mode: server mode needs a GPU",
    # Oumi's TRL_SFT with its LoRA (training.use_peft): grpo-web's SFT runs train every weight
    "oumi_llama3_2_3b_lora_fsdp_sft.yaml": "training.use_peft: grpo-web's SFT runs train every weight",
    # `reward_functions: []`: a vision model scored by verl's data_source default, which grpo-web has no equivalent of
    "oumi_grpo_verl_geometry3k.yaml": "reward_funcs: name at least one",
}


@pytest.fixture
def corpus_owner(owner, tiny_model):
    corpus_owner_setup(owner)
    return owner


def imported(name: str, owner):
    result = api_import(yaml_text=corpus_yaml(name), config=None, owner=owner)
    problems = result.errors or spec_problems(RunSpec.from_imported(result), owner=owner, queue_anyway=True)
    return result, problems


def test_the_corpus_has_twenty_published_configs_each_with_its_source_on_the_first_line():
    files = corpus_files()
    assert len(files) >= 20
    for name in files:
        first = (CORPUS / name).read_text().splitlines()[0]
        assert first.startswith("# source: https://github.com/") and "/blob/" in first, name


def test_each_published_config_imports_or_is_refused_for_its_own_reason(corpus_owner, tmp_path):
    from workers.training.sft import sft_config
    from workers.training.train import grpo_config

    api = api_client(corpus_owner)
    for name in corpus_files():
        result, problems = imported(name, corpus_owner)
        # through POST /api/runs too, where no sandbox worker is needed (no reward of the user's code to check)
        if name in REFUSED or all(r.get("builtin") for r in result.rewards):
            body = {"yaml": corpus_yaml(name), "queue_anyway": True}
            response = api.post("/api/runs", body, content_type="application/json")
            assert response.status_code == (400 if name in REFUSED else 201), (name, response.content[:300])
        if name in REFUSED:
            assert any(REFUSED[name] in p for p in problems), (name, problems)
            continue
        assert problems == [], (name, problems)
        spec = RunSpec.from_imported(result)
        train = run_train_config(spec.as_run(), slot_base=0, write_files=False)
        train = dataclasses.replace(train, output_dir=str(tmp_path / "out"))
        if spec.trainer == "verl":
            assert_verl_batches_as_published(name, train, spec.requested_gpus)
        elif spec.kind == "sft":
            sft_config(train)  # as the worker builds it: no key given twice, none SFTConfig refuses
        else:
            grpo_config(dataclasses.replace(train, grpo=dataclasses.replace(train.grpo, use_vllm=False)))


def assert_verl_batches_as_published(name: str, train, gpus: int) -> None:
    """The verl run's own overrides give verl the file's batches and GPUs back, not inflated ones."""
    data = corpus_mapping(name)
    source = flatten(data)
    if "training" in data:  # Oumi: its verl_config_overrides
        source = flatten(data["training"]["verl_config_overrides"])
    got = dict(
        o.split("=", 1)
        for o in overrides(
            train,
            train_file="t",
            val_file="v",
            reward_path="r",
            config_path="c",
            gpus=source.get("trainer.n_gpus_per_node", 1),
            nnodes=source.get("trainer.nnodes", 1),
        )
    )
    for key in (
        "data.train_batch_size",
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
        "trainer.n_gpus_per_node",
        "trainer.nnodes",
        "actor_rollout_ref.rollout.n",
    ):
        if source.get(key) is not None:
            assert yaml.safe_load(got[key]) == source[key], (name, key, got[key], source[key])
    assert gpus == source.get("trainer.n_gpus_per_node", 1) * source.get("trainer.nnodes", 1), name
    if source.get("trainer.test_freq") is not None:
        assert got["trainer.test_freq"] == str(source["trainer.test_freq"]), name


def test_reward_names_bind_to_the_library_copies_of_the_sources_functions(corpus_owner):
    """open-r1's and Oumi's registry names bind to the built-ins with their behaviour (tests/rewards/
    test_source_rewards_agree.py compares them with the source's own), not to a different function."""
    from rewards.library import source
    from rewards.models import RewardFunctionVersion

    for name, expected in [
        ("open-r1_qwen2.5-1.5b_grpo_demo.yaml", ["accuracy", "format", "tag_count"]),
        ("oumi_letter_counting_grpo.yaml", ["count_letters"]),
        ("oumi_grpo_tldr.yaml", ["soft_20tokens_completions"]),
    ]:
        result = api_import(yaml_text=corpus_yaml(name), config=None, owner=corpus_owner)
        assert [r["name"] for r in result.rewards] == expected, name
        for r in result.rewards:
            assert RewardFunctionVersion.objects.get(pk=r["version_id"]).source == source(r["name"]), (name, r)


def test_a_dataset_named_without_a_version_binds_to_the_users_not_one_an_import_made(corpus_owner):
    from runs.models import DatasetVersion

    mine = DatasetVersion.objects.filter(dataset__name="corpus").order_by("-number").first()
    recipe = api_import(yaml_text=corpus_yaml("open-r1_qwen2.5-1.5b_grpo_demo.yaml"), config=None, owner=corpus_owner)
    made = recipe.dataset_version
    assert made.number > mine.number and made.system_prompt and made.provenance["kind"] == "import"
    plain = "model_name_or_path: tiny\ndataset_name: corpus\nreward_funcs: [format]\n"
    assert api_import(yaml_text=plain, config=None, owner=corpus_owner).dataset_version == mine
    # the recipe again: the version it made is found, not made twice
    assert (
        api_import(
            yaml_text=corpus_yaml("open-r1_qwen2.5-1.5b_grpo_demo.yaml"), config=None, owner=corpus_owner
        ).dataset_version
        == made
    )
    # named with its number, the import-made version is the one
    assert (
        api_import(
            yaml_text=plain + f"dataset_version: {made.number}\n", config=None, owner=corpus_owner
        ).dataset_version
        == made
    )
