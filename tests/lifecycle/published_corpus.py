"""The corpus of published configs (tests/lifecycle/published_configs/), as the corpus tests import them: each file is
kept as its source published it, its source repository, path and commit on its first line. What the tests change,
listed here and nowhere else:

- model hub ids become ``tiny`` (the local tiny model): ``model_name_or_path``, Oumi's ``model.model_name``, verl's
  ``actor_rollout_ref.model.path``;
- dataset hub ids become ``corpus`` (the owner's one local dataset, whose rows have every column the recipes read):
  ``dataset_name``, Oumi's ``data.train.datasets[].dataset_name``, the folder of verl's ``data.train_files``;
- verl's launch scripts are their ``key=value`` overrides turned into YAML, nested at the dots (as docs/runs.md says),
  and the composed one is verl's generated ppo_trainer.yaml with run_qwen2-7b.sh's overrides merged in (what
  ``print_cfg.py`` prints for that script);
- open-r1's SFT recipes and TRL's CLI example are launched by ``trl sft --config``: the command says SFT, so the import
  gets ``trainer: sft`` beside the file (without it, a hint says to add it);
- verl scores by each row's ``data_source`` with its own rule-based scorers, which no key names: the verl files get
  grpo-web's own ``reward_funcs: [gsm8k]`` beside them (a top-level key the verl import reads).

Reward names the files use that grpo-web has no built-in of are the owner's own functions of those names."""

from __future__ import annotations

import copy
import dataclasses
import functools
import io
import json
import shlex
from pathlib import Path

import yaml

from rewards.builtins import TRUSTED
from rewards.models import RewardFunction
from rewards.services import reward_create
from runs.datasets.mapping import Mapping
from runs.datasets.services import dataset_import, dataset_version_map
from runs.lifecycle.trl_yaml import LIBRARY, REWARD_ALIASES

CORPUS = Path(__file__).parent / "published_configs"
SFT_LAUNCHED = {
    "open-r1_openr1-distill-7b_sft_distill.yaml",
    "open-r1_olympiccoder-7b_sft.yaml",
    "open-r1_olympiccoder-32b_sft.yaml",
    "trl_cli_example_config.yaml",
    "trl_docs_clis_sft_config_num_processes.yaml",
}
VERL_REWARD = "gsm8k"
DATASET = "corpus"


def corpus_files() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if p.suffix in (".yaml", ".sh"))


def verl_script_as_yaml(script: str) -> dict:
    """A verl launch script's ``key=value`` overrides as the nested mapping they set."""
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    out: dict = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key[0].isalpha() or "." not in key:
            continue
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(value) if value else None
    return out


def merged(base: dict, more: dict) -> dict:
    out = dict(base)
    for key, value in more.items():
        out[key] = merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


@functools.cache
def composed_verl() -> dict:
    """verl's generated ppo_trainer.yaml with run_qwen2-7b.sh's overrides, interpolations resolved by OmegaConf."""
    from omegaconf import OmegaConf

    base = yaml.safe_load((CORPUS / "verl_generated_ppo_trainer.yaml").read_text())
    script = verl_script_as_yaml((CORPUS / "verl_run_qwen2-7b.sh").read_text())
    return OmegaConf.to_container(OmegaConf.create(merged(base, script)), resolve=True)


def corpus_mapping(name: str, *, as_launched: bool = True) -> dict:
    """The file as the import reads it, with the swaps listed in this module's docstring."""
    if name == "verl_generated_ppo_trainer.yaml":
        data = composed_verl()
    elif name.endswith(".sh"):
        data = verl_script_as_yaml((CORPUS / name).read_text())
    else:
        data = yaml.safe_load((CORPUS / name).read_text())
    data = copy.deepcopy(data)
    if "model_name_or_path" in data:
        data["model_name_or_path"] = "tiny"
    if "dataset_name" in data:
        data["dataset_name"] = DATASET
    if isinstance(data.get("model"), dict) and "model_name" in data["model"]:
        data["model"]["model_name"] = "tiny"
    for part in ("train", "validation"):
        for entry in ((data.get("data") or {}).get(part) or {}).get("datasets") or []:
            entry["dataset_name"] = DATASET
    if isinstance(data.get("actor_rollout_ref"), dict):
        data["actor_rollout_ref"].setdefault("model", {})["path"] = "tiny"
        for key in ("train_files", "val_files"):
            data["data"][key] = f"~/data/{DATASET}/{key.split('_')[0]}.parquet"
        if as_launched:
            data["reward_funcs"] = [VERL_REWARD]
    if as_launched and name in SFT_LAUNCHED:
        data["trainer"] = "sft"
    return data


def corpus_yaml(name: str, **kwargs) -> str:
    return yaml.safe_dump(corpus_mapping(name, **kwargs), sort_keys=False)


def corpus_owner_setup(owner) -> None:
    """The owner's datasets and reward functions the corpus names."""
    rows = [
        {
            "prompt": f"What is {i} + {i}?",
            "problem": f"What is {i} + {i}?",
            "problem_statement": f"Write f() returning {2 * i}.",
            "solution": f"${2 * i}$",
            "answer": str(2 * i),
            "completion": f"<think>{i} and {i}</think><answer>{2 * i}</answer>",
            "tests": json.dumps([f"assert {i} + {i} == {2 * i}"]),
        }
        for i in range(40)
    ]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    version = dataset_import(owner=owner, name=DATASET, stream=io.BytesIO(data), source_name="corpus.jsonl")
    # a quarter held out: verl's val_files and Oumi's validation sets evaluate on it
    split = dataclasses.replace(Mapping.of(version), split="fraction", eval_fraction=0.25, split_seed=3)
    dataset_version_map(version=version, mapping=split)
    names = set()
    for path in CORPUS.iterdir():
        data = corpus_mapping(path.name)
        names |= set(data.get("reward_funcs") or [])
        names |= set(((data.get("training") or {}).get("reward_functions")) or [])
    for name in sorted(names - LIBRARY - set(TRUSTED) - set(REWARD_ALIASES)):
        if not RewardFunction.objects.filter(owner=owner, name=name).exists():
            source = f"def {name}(completions, **kwargs):\n    return [0.0] * len(completions)\n"
            reward_create(owner=owner, name=name, source_code=source, entrypoint=name)
