"""An Oumi file means what Oumi makes of it (issue 43): Oumi's ``TrainingParams.to_hf`` hands TRL's config each
training key (some under TRL's own name: optimizer is TRL's optim), ``oumi.train`` builds the ``peft:`` LoRA when
``training.use_peft`` and shards with ``fsdp:``, and ``data:`` says which rows train. Each key of an Oumi file is
carried to what TRL receives as Oumi passes it, noted with its true reason, or refused naming it: none is dropped.
``trainer_type: TRL_SFT`` is an SFT run.

TO_HF below is Oumi's mapping as read from its source (oumi-ai/oumi d8ed0777, src/oumi/core/configs/params/
training_params.py ``to_hf``, grpo_params.py ``to_hf_trainer_kwargs``, training_config.py ``__post_init__``);
where Oumi itself is importable, the last test checks it, and grpo-web's import, against Oumi's own ``to_hf``."""

import dataclasses
import math
import sys
from pathlib import Path

import pytest
import yaml

from runs.lifecycle.oumi_yaml import from_oumi_yaml
from runs.lifecycle.trl_yaml import parse_run_yaml
from tests.lifecycle.published_corpus import corpus_files, corpus_mapping, corpus_owner_setup, corpus_yaml

# Oumi itself, without its dependencies (it pins an older torch): scripts/dev.sh install puts it beside the environment
OUMI_LIB = Path(sys.prefix) / "oumi-lib"
if OUMI_LIB.is_dir() and str(OUMI_LIB) not in sys.path:
    sys.path.append(str(OUMI_LIB))

pytestmark = pytest.mark.django_db

# Oumi's key -> the field TRL's config (or grpo-web's run) receives it as
TO_HF = {
    **{
        f"training.{k}": k
        for k in (
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "max_steps",
            "num_train_epochs",
            "learning_rate",
            "lr_scheduler_type",
            "lr_scheduler_kwargs",
            "warmup_steps",
            "weight_decay",
            "adam_beta1",
            "adam_beta2",
            "adam_epsilon",
            "gradient_checkpointing_kwargs",
            "logging_first_step",
            "eval_strategy",
            "eval_steps",
            "save_steps",
            "seed",
            "data_seed",
            "full_determinism",
            "dataloader_persistent_workers",
            "ddp_find_unused_parameters",
            "max_grad_norm",
            "use_peft",
        )
    },
    "training.optimizer": "optim",
    "training.enable_gradient_checkpointing": "gradient_checkpointing",
    "training.compile": "torch_compile",
    "training.empty_device_cache_steps": "torch_empty_cache_steps",
    "training.include_performance_metrics": "include_num_input_tokens_seen",
    "training.reward_functions": "reward_funcs",
    "training.run_name": "name",
    "model.model_name": "model",
    "data.train.datasets[0].dataset_name": "dataset",
    **{
        f"training.grpo.{k}": k
        for k in (
            "max_completion_length",
            "num_generations",
            "temperature",
            "remove_unused_columns",
            "repetition_penalty",
            "epsilon",
            "log_completions",
            "use_vllm",
            "vllm_mode",
            "vllm_gpu_memory_utilization",
        )
    },
    **{f"peft.{k}": k for k in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")},
}
OUMI_FILES = [n for n in corpus_files() if n.startswith("oumi_")]
BASE = "model:\n  model_name: tiny\ndata:\n  train:\n    datasets:\n      - dataset_name: arithmetic\n"


def grpo(more: str = "", top: str = "") -> str:
    return BASE + "training:\n  trainer_type: TRL_GRPO\n  reward_functions: [format]\n" + more + top


def said(imported) -> dict:
    """Each note and error by the key it names."""
    return {m.split(":", 1)[0]: m for m in imported.notes + imported.errors}


def test_a_peft_section_is_the_runs_lora_as_oumi_builds_it(owner, dataset_version):
    text = grpo(
        "  use_peft: true\n",
        "peft:\n  lora_r: 64\n  lora_alpha: 128\n  lora_dropout: 0.1\n  lora_target_modules: [q_proj, v_proj]\n",
    )
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == []
    c = imported.config
    assert (c["use_peft"], c["lora_r"], c["lora_alpha"], c["lora_dropout"], c["lora_target_modules"]) == (
        True,
        64,
        128,
        0.1,
        "q_proj,v_proj",
    )


def test_a_lora_the_file_leaves_at_oumis_defaults_takes_oumis_not_grpo_webs(owner, dataset_version):
    imported = parse_run_yaml(grpo("  use_peft: true\n", "peft:\n  q_lora: false\n"), owner=owner)
    assert imported.errors == []
    assert (imported.config["lora_r"], imported.config["lora_alpha"], imported.config["lora_dropout"]) == (8, 8, 0.0)
    notes = said(imported)
    assert "Oumi's LoRA takes its default 8" in notes["peft.lora_r"]
    assert "'all-linear'" in notes["peft.lora_target_modules"]


def test_peft_without_use_peft_builds_no_lora_and_says_so(owner, dataset_version):
    imported = parse_run_yaml(grpo("", "peft:\n  lora_r: 64\n"), owner=owner)
    assert imported.errors == [] and imported.config["use_peft"] is False
    assert "training.use_peft is not true" in said(imported)["peft.lora_r"]


def test_a_lora_grpo_web_cannot_train_is_refused_naming_the_key(owner, dataset_version):
    imported = parse_run_yaml(grpo("  use_peft: true\n", "peft:\n  q_lora: true\n  lora_bias: all\n"), owner=owner)
    assert {"peft.q_lora", "peft.lora_bias"} <= {e.split(":", 1)[0] for e in imported.errors}


def test_every_fsdp_key_is_noted(owner, dataset_version):
    text = grpo("", "fsdp:\n  enable_fsdp: true\n  sharding_strategy: HYBRID_SHARD\n  forward_prefetch: true\n")
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == []
    notes = said(imported)
    for key in ("fsdp.enable_fsdp", "fsdp.sharding_strategy", "fsdp.forward_prefetch"):
        assert "grpo-web trains data-parallel" in notes[key], key


def test_every_data_key_is_noted_or_refused(owner, dataset_version):
    text = (
        "model:\n  model_name: tiny\ndata:\n  train:\n    stream: true\n    datasets:\n"
        "      - dataset_name: text_sft_jsonl\n        dataset_path: /data/arithmetic.jsonl\n        split: train\n"
        "        subset: main\n        shuffle: true\n        dataset_kwargs:\n          return_conversations: true\n"
        "  validation:\n    datasets:\n      - dataset_name: arithmetic\n        split: test\n"
        "  test:\n    datasets:\n      - dataset_name: arithmetic\n"
        "training:\n  trainer_type: TRL_GRPO\n  reward_functions: [format]\n"
    )
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == [] and imported.dataset_version == dataset_version  # dataset_path names the dataset
    notes = said(imported)
    first = "data.train.datasets[0]"
    assert "read as your dataset 'arithmetic'" in notes[f"{first}.dataset_path"]
    assert "the dataset version's own split decides" in notes[f"{first}.split"]
    assert "Hub config" in notes[f"{first}.subset"]
    assert "TRL's sampler shuffles" in notes[f"{first}.shuffle"]
    assert "Oumi's dataset class" in notes[f"{first}.dataset_kwargs"]
    for key in ("data.train.stream", "data.validation.datasets[0].split", "data.test.datasets[0].dataset_name"):
        assert key in notes, key


def test_data_that_changes_which_rows_train_is_refused(owner, dataset_version):
    text = BASE + "        sample_count: 10\n    pack: true\ntraining:\n  trainer_type: TRL_GRPO\n"
    errors = {e.split(":", 1)[0] for e in parse_run_yaml(text, owner=owner).errors}
    assert {"data.train.datasets[0].sample_count", "data.train.pack"} <= errors


@pytest.mark.parametrize(
    ("oumi", "trl", "value"),
    [
        ("optimizer", "optim", "adafactor"),
        ("gradient_checkpointing_kwargs", "gradient_checkpointing_kwargs", {"use_reentrant": False}),
        ("ddp_find_unused_parameters", "ddp_find_unused_parameters", False),
        ("compile", "torch_compile", True),
        ("empty_device_cache_steps", "torch_empty_cache_steps", 5),
    ],
)
def test_keys_oumi_passes_to_trl_reach_trl_not_called_oumis_own(owner, dataset_version, oumi, trl, value):
    imported = parse_run_yaml(
        grpo(f"  {oumi}: {yaml.safe_dump(value, default_flow_style=True).strip()}\n"), owner=owner
    )
    assert imported.errors == []
    assert imported.extra[trl] == value
    assert not any(n.startswith(f"training.{oumi}:") and "Oumi's own" in n for n in imported.notes)


def test_omitted_keys_take_what_oumi_passes_trl(owner, dataset_version):
    imported = parse_run_yaml(grpo(), owner=owner)
    assert imported.errors == []
    # TrainingParams' learning_rate 5e-05, GrpoParams' temperature 0.9 (TRL's are 1e-06 and 1.0)
    assert (imported.config["learning_rate"], imported.config["temperature"]) == (5e-05, 0.9)
    assert imported.config["gradient_checkpointing"] is False
    assert "left out; Oumi passes its default 5e-05" in said(imported)["training.learning_rate"]


def test_an_oumi_trl_sft_file_is_an_sft_run(owner, tiny_model, tmp_path):
    from runs.lifecycle.spec import RunSpec
    from runs.lifecycle.training_config import run_train_config
    from workers.training.sft import sft_config

    corpus_owner_setup(owner)
    imported = parse_run_yaml(corpus_yaml("oumi_llama3_2_1b_full_sft.yaml"), owner=owner)
    assert imported.errors == []
    assert imported.kind == "sft" and imported.trainer == "trl"
    c = imported.config
    assert (c["max_length"], c["learning_rate"], c["per_device_train_batch_size"], c["save_steps"]) == (
        8192,  # model.model_max_length: Oumi's __post_init__ gives it to SFTConfig as max_length
        2e-05,
        4,
        100,
    )
    assert c["gradient_accumulation_steps"] == 4 and c["gradient_checkpointing"] is False
    assert imported.extra["optim"] == "adamw_torch_fused" and imported.extra["torch_empty_cache_steps"] == 50
    train = run_train_config(RunSpec.from_imported(imported).as_run(), slot_base=0, write_files=False)
    args = sft_config(dataclasses.replace(train, output_dir=str(tmp_path / "out")))
    assert (args.optim, args.max_length, args.gradient_checkpointing) == ("adamw_torch_fused", 8192, False)


def test_trainer_kwargs_that_override_training_grpo_are_refused_as_to_hf_refuses_them(owner, dataset_version):
    # GrpoParams always passes temperature (its default 0.9), so trainer_kwargs may not set it
    imported = parse_run_yaml(grpo("  trainer_kwargs:\n    temperature: 0.5\n"), owner=owner)
    assert any(e.startswith("training.trainer_kwargs.temperature: Oumi refuses it") for e in imported.errors)


def test_an_sft_files_model_max_length_wins_over_its_trainer_kwargs_as_in_oumi(owner, tiny_model):
    corpus_owner_setup(owner)
    data = corpus_mapping("oumi_llama3_2_1b_full_sft.yaml")
    data["training"]["trainer_kwargs"] = {"max_length": 512}
    imported = parse_run_yaml(yaml.safe_dump(data), owner=owner)
    assert imported.errors == [] and imported.config["max_length"] == 8192
    assert "gives way to model.model_max_length" in said(imported)["training.trainer_kwargs.max_length"]


def test_an_oumi_sft_file_with_reward_functions_is_refused_as_oumi_refuses_it(owner, dataset_version):
    text = BASE + "training:\n  trainer_type: TRL_SFT\n  reward_functions: [format]\n"
    errors = parse_run_yaml(text, owner=owner).errors
    assert any(e.startswith("training.reward_functions: Oumi refuses reward functions for TRL_SFT") for e in errors)


def test_an_sft_lora_is_refused_for_its_reason(owner, tiny_model):
    corpus_owner_setup(owner)
    imported = parse_run_yaml(corpus_yaml("oumi_llama3_2_3b_lora_fsdp_sft.yaml"), owner=owner)
    assert any(e.startswith("training.use_peft: grpo-web's SFT runs train every weight") for e in imported.errors)


def leaves(data, path=""):
    """(dotted path, value) of each leaf of an Oumi file (a mapping TRL takes whole, such as
    gradient_checkpointing_kwargs, is one); list entries of mappings as [i]."""
    if isinstance(data, dict) and path not in TO_HF:
        for key, value in data.items():
            yield from leaves(value, f"{path}.{key}" if path else key)
    elif isinstance(data, list) and data and all(isinstance(v, dict) for v in data):
        for i, value in enumerate(data):
            yield from leaves(value, f"{path}[{i}]")
    else:
        yield path, data


def run_value(imported, mapping: dict, name: str):
    if imported.errors:  # refused: what the Oumi reading carried
        return mapping.get({"model": "model_name_or_path", "dataset": "dataset_name"}.get(name, name), KeyError(name))
    if name == "model":
        return imported.model
    if name == "dataset":
        return imported.dataset_version.dataset.name
    if name == "reward_funcs":
        return [r["name"] for r in imported.rewards]
    if name == "name":
        return imported.name
    for where in (imported.config, imported.extra, imported.evaluation):
        if name in where:
            return where[name]
    return KeyError(name)


def same(file_value, got) -> bool:
    if isinstance(got, float) and isinstance(file_value, str | int) and not isinstance(file_value, bool):
        return math.isclose(float(file_value), got)
    if isinstance(got, str) and isinstance(file_value, list):
        return got == ",".join(file_value)
    return file_value == got


@pytest.mark.parametrize("name", OUMI_FILES)
def test_every_key_of_each_oumi_file_is_carried_noted_or_refused(owner, tiny_model, name):
    corpus_owner_setup(owner)
    data = corpus_mapping(name)
    imported = parse_run_yaml(corpus_yaml(name), owner=owner)
    mapping, _, _ = from_oumi_yaml(data)
    named = [m.split(": ", 1)[0] for m in imported.notes + imported.errors]
    silent = []
    for path, value in leaves(data):
        if path == "training.trainer_type":
            continue
        if path.startswith("training.verl_config_overrides."):
            continue  # verl's own keys: tests/verl check them against verl's config
        if any(path == key or path.startswith(key + ".") for key in named):
            continue  # noted or refused, naming it
        if path == "training.num_train_epochs" and not imported.errors:
            # epochs become steps (the run's max_steps), with a note naming them
            assert any(f"num_train_epochs={value:g}" in n or f"{value:g} epochs" in n for n in imported.notes), name
            continue
        if path in TO_HF and TO_HF[path] in named:
            continue  # carried under TRL's name, which the TRL import then notes (eval_strategy: grpo-web evaluates)
        if path in TO_HF:
            got = run_value(imported, mapping, TO_HF[path])
            assert same(value, got), (name, path, value, got)
            continue
        silent.append(path)
    assert silent == [], (name, silent)


@pytest.mark.parametrize("name", [n for n in OUMI_FILES if "verl" not in n])
def test_each_oumi_trl_file_gives_trl_what_oumis_own_to_hf_gives(owner, tiny_model, trl_defaults, tmp_path, name):
    pytest.importorskip("oumi")
    from oumi.core.configs import TrainingConfig

    from runs.lifecycle.spec import RunSpec
    from runs.lifecycle.training_config import run_train_config
    from workers.training.sft import sft_config
    from workers.training.train import grpo_config

    corpus_owner_setup(owner)
    data = corpus_mapping(name)
    data["training"]["per_device_train_batch_size"] = 8  # one process: a whole number of groups, as TRL requires
    data["training"].pop("use_peft", None)  # grpo-web's SFT runs have no LoRA (refused above)
    imported = parse_run_yaml(yaml.safe_dump(data), owner=owner)
    assert imported.errors == [], imported.errors
    path = tmp_path / "oumi.yaml"
    path.write_text(yaml.safe_dump(data))
    config = TrainingConfig.from_yaml(str(path))
    config.training.dataloader_num_workers = 0  # "auto" is resolved by Oumi's launcher; grpo-web sets 0
    theirs = config.training.to_hf(config)
    train = run_train_config(RunSpec.from_imported(imported).as_run(), slot_base=0, write_files=False)
    train = dataclasses.replace(train, output_dir=str(tmp_path / "out"))
    if imported.kind == "sft":
        ours = sft_config(train)
    else:
        ours = grpo_config(dataclasses.replace(train, grpo=dataclasses.replace(train.grpo, use_vllm=False)))
        theirs.use_vllm = False
    # eval_*: grpo-web evaluates on the version's eval split itself, TRL's evaluation stays off (noted)
    fields = set(TO_HF.values()) - {
        "model",
        "dataset",
        "reward_funcs",
        "name",
        "use_peft",
        "eval_strategy",
        "eval_steps",
    }
    fields |= {"max_length"} if imported.kind == "sft" else set()
    if theirs.max_steps == -1:  # epochs: grpo-web works out their steps (tests/lifecycle: epochs become max_steps)
        fields -= {"max_steps", "num_train_epochs"}
    for field in sorted(fields):
        if hasattr(theirs, field):
            mine, oumis = getattr(ours, field), getattr(theirs, field)
            assert mine == oumis or (mine in (None, {}) and oumis in (None, {})), (name, field, mine, oumis)


def test_the_keys_read_are_oumis_own_dataclass_fields():
    pytest.importorskip("oumi")
    from oumi.core.configs.params import (
        data_params,
        deepspeed_params,
        fsdp_params,
        grpo_params,
        model_params,
        peft_params,
        training_params,
    )

    from runs.lifecycle import oumi_keys as k

    for ours, theirs in (
        (k.MODEL_KEYS, model_params.ModelParams),
        (k.SPLIT_KEYS, data_params.DatasetSplitParams),
        (k.DATASET_KEYS, data_params.DatasetParams),
        (k.TRAINING_KEYS, training_params.TrainingParams),
        (k.GRPO_KEYS, grpo_params.GrpoParams),
        (k.PEFT_KEYS, peft_params.PeftParams),
        (k.FSDP_KEYS, fsdp_params.FSDPParams),
        (k.DEEPSPEED_KEYS, deepspeed_params.DeepSpeedParams),
    ):
        assert ours == {f.name for f in dataclasses.fields(theirs)}, theirs.__name__
