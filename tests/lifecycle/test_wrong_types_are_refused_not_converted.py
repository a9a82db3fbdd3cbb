"""Wrong types are refused, not converted (issue 43, item 4): a value its field's type does not hold is an error naming
the key, the value and the type, as the file's own trainer would take it: TRL's CLI (TrlParser, an HfArgumentParser
that parses only strings, by the field's type), verl's typed config (OmegaConf's nodes). 64.7 steps, 3.9 GPUs, a
learning rate of ``true``, a mapping as the system prompt, verl's ``"maybe"`` are refused; what TRL's CLI parses
(``learning_rate: 1e-6``, a string to YAML 1.1; ``use_vllm: "false"``) and verl's ``"false"`` are taken as the trainer
takes them. A seeded property test gives every field a value of another type, through the import every route shares
and through the API, the CLI and the import page."""

import random

import pytest
import yaml
from django.urls import reverse
from django.utils.html import escape
from grpo_web_protocol import trl_fields
from grpo_web_protocol.config import EVAL_FIELDS, GRPO_FIELDS, SFT_FIELDS, TOKEN_FIELDS
from grpo_web_protocol.verl_keys import FROM_VERL

from runs.accounts.services import token_create
from runs.lifecycle.trl_types import field_types
from runs.lifecycle.trl_yaml import MANAGED, SCRIPT_TYPES, parse_run_yaml
from runs.models import DatasetVersion, Run
from tests.api.conftest import api_client
from tests.lifecycle.test_a_config_over_the_size_limit_is_refused_whole import cli_submit

pytestmark = pytest.mark.django_db

BASE = {"model_name_or_path": "tiny", "dataset_name": "arithmetic", "reward_funcs": ["digit_ratio"]}
VERL = {
    "algorithm": {"adv_estimator": "grpo"},
    "data": {"train_files": "~/data/arithmetic/train.parquet", "train_batch_size": 8},
    "actor_rollout_ref": {"model": {"path": "tiny"}, "actor": {"ppo_mini_batch_size": 8}, "rollout": {"n": 4}},
    "trainer": {"n_gpus_per_node": 1, "total_training_steps": 5},
    "reward_funcs": ["digit_ratio"],
}


def imported(owner, **keys):
    return parse_run_yaml(yaml.safe_dump({**BASE, **keys}), owner=owner)


def errors_of(owner, **keys) -> list[str]:
    return imported(owner, **keys).errors


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("max_steps", 64.7, "max_steps: 64.7 is not a whole number (int)"),
        ("requested_gpus", 3.9, "requested_gpus: 3.9 is not a whole number (int)"),
        ("learning_rate", True, "learning_rate: true is not a number (float)"),
        ("num_generations", "3.9", "num_generations: '3.9' is not a whole number (int)"),
        ("use_vllm", "maybe", "use_vllm: 'maybe' is not true or false"),
        ("system_prompt", {"role": "system"}, "system_prompt: {'role': 'system'} is not text (str)"),
        ("reward_weights", [True], "reward_weights: true is not a number (float)"),
        ("num_train_epochs", "two", "num_train_epochs: 'two' is not a number (float)"),
        ("top_entropy_quantile", "high", "top_entropy_quantile: 'high' is not a number (float)"),  # passed through
        ("generation_kwargs", 7, "generation_kwargs: 7 is not a mapping (dict) or text (str)"),
        ("loss_type", 3, "loss_type: 3 is not text (str)"),
    ],
)
def test_a_value_of_another_type_is_refused_naming_the_key_value_and_type(owner, dataset_version, key, value, expected):
    errors = errors_of(owner, **{key: value})
    assert any(e.startswith(expected) for e in errors), errors


def test_a_mapping_as_the_system_prompt_makes_no_dataset_version(owner, dataset_version):
    errors_of(owner, system_prompt={"role": "system", "content": "think"})
    assert DatasetVersion.objects.filter(dataset=dataset_version.dataset).count() == 1


def test_what_trls_cli_parses_from_a_string_is_taken_as_trl_takes_it(owner, dataset_version):
    result = imported(owner, learning_rate="1e-6", use_vllm="false", max_steps="12", beta=0, top_entropy_quantile="0.5")
    assert result.errors == []
    assert result.config["learning_rate"] == 1e-06 and result.config["use_vllm"] is False
    assert result.config["max_steps"] == 12 and result.config["beta"] == 0.0
    assert result.extra["top_entropy_quantile"] == 0.5


def verl_import(owner, **actor):
    data = yaml.safe_load(yaml.safe_dump(VERL))
    data["actor_rollout_ref"]["actor"].update(actor)
    return parse_run_yaml(yaml.safe_dump(data), owner=owner)


def test_verls_string_false_turns_the_kl_loss_off_as_omegaconf_reads_it(owner, dataset_version):
    result = verl_import(owner, use_kl_loss="false", kl_loss_coef=0.04)
    assert result.errors == [] and result.config["beta"] == 0.0


def test_verls_maybe_is_refused_not_read_as_true(owner, dataset_version):
    result = verl_import(owner, use_kl_loss="maybe")
    assert "actor_rollout_ref.actor.use_kl_loss: 'maybe' is not true or false (bool)" in result.errors[0]
    data = yaml.safe_load(yaml.safe_dump(VERL))
    data["actor_rollout_ref"]["model"]["enable_gradient_checkpointing"] = "maybe"
    errors = parse_run_yaml(yaml.safe_dump(data), owner=owner).errors
    assert any(e.startswith("actor_rollout_ref.model.enable_gradient_checkpointing: 'maybe'") for e in errors)


def test_a_verl_whole_number_given_as_a_fraction_is_refused(owner, dataset_version):
    data = yaml.safe_load(yaml.safe_dump(VERL))
    data["trainer"]["n_gpus_per_node"] = 1.5
    errors = parse_run_yaml(yaml.safe_dump(data), owner=owner).errors
    assert errors == [
        "trainer.n_gpus_per_node: 1.5 is not a whole number (int), as verl's config holds it; refused, not converted"
    ]


# --- the property: every field, a value of another type -------------------------------------------------------------

POOL = [64.7, True, 7, "maybe", {"a": 1}, [1, 2]]


def holds(value, types) -> bool:
    """Whether TRL's CLI takes ``value`` for a field of ``types`` (independent of the code under test: the pool's
    only string, "maybe", parses as no bool, int or float)."""
    kind = {bool: "bool", int: "int", float: "float", str: "str", dict: "dict", list: "list"}[type(value)]
    return "any" in types or kind in types or (kind == "int" and "float" in types)


def typed_fields(kind: str) -> dict:
    """Every key a file of ``kind`` may set with a type, and the types: grpo-web's config and evaluation fields,
    TRL's other config fields (passed through, set by grpo-web, or not applied), the script keys."""
    own = SFT_FIELDS if kind == "sft" else GRPO_FIELDS
    names = trl_fields.SFT_CONFIG_FIELDS if kind == "sft" else trl_fields.grpo_config_fields()
    out = {k: tuple(v) for k, v in SCRIPT_TYPES.items() if k not in ("trainer", "dataset_version")}
    for name in names:
        schema = trl_fields.schema_field(name)
        if schema and name not in own and name not in EVAL_FIELDS and "any" not in schema["types"]:
            out[name] = tuple(schema["types"])
    for fields in (own, EVAL_FIELDS, TOKEN_FIELDS):
        out |= {name: field_types(f.type) for name, f in fields.items()}
    # TRL's bf16 is a bool (grpo-web's adds "auto"); scale_rewards: TRL's older boolean form; TRL's list of modules
    for key, more in (("bf16", "bool"), ("scale_rewards", "bool"), ("lora_target_modules", "list")):
        if key in out:
            out[key] += (more,)
    return out


def wrong_file(seed: int, kind: str = "grpo") -> tuple[dict, dict]:
    """(a file giving every typed field a random value of another type, those values)."""
    rng = random.Random(seed)
    wrong = {}
    for key, types in sorted(typed_fields(kind).items()):
        choices = [v for v in POOL if not holds(v, types)]
        if choices:
            wrong[key] = rng.choice(choices)
    data = {**BASE, **wrong, **({"trainer": "sft"} if kind == "sft" else {})}
    for key in ("model_name_or_path", "dataset_name"):  # named by the refusal; the rest is read without them
        data.setdefault(key, BASE[key])
    return data, wrong


def unnamed(errors: list[str], wrong: dict) -> list[str]:
    return [key for key in wrong if not any(e.startswith(f"{key}:") for e in errors)]


@pytest.mark.parametrize("seed, kind", [(1, "grpo"), (2, "grpo"), (3, "sft")])
def test_every_field_given_another_type_is_refused_by_name(owner, dataset_version, seed, kind):
    data, wrong = wrong_file(seed, kind)
    assert len(wrong) > (40 if kind == "sft" else 150)
    assert set(MANAGED) & set(wrong)  # grpo-web's own settings are held to TRL's types too
    errors = parse_run_yaml(yaml.safe_dump(data), owner=owner).errors
    assert unnamed(errors, wrong) == []


def test_each_field_alone_given_another_type_is_refused_by_name(owner, dataset_version):
    rng = random.Random(4)
    fields = typed_fields("grpo")
    for key in rng.sample(sorted(fields), 40):
        value = rng.choice([v for v in POOL if not holds(v, fields[key])])
        errors = errors_of(owner, **{key: value})
        assert any(e.startswith(f"{key}:") for e in errors), (key, value, errors)


def test_every_verl_field_given_another_type_is_refused_by_name(owner, dataset_version):
    rng = random.Random(5)
    kinds = {"int": (64.7, True, "maybe", [1]), "float": (True, "maybe", {"a": 1}), "bool": ("maybe", 1.5, [1])}
    kinds["str"] = ({"a": 1},)
    for key, (_, kind, _) in FROM_VERL.items():
        data = yaml.safe_load(yaml.safe_dump(VERL))
        *path, last = key.split(".")
        node = data
        for part in path:
            node = node.setdefault(part, {})
        node[last] = rng.choice(kinds[kind])
        errors = parse_run_yaml(yaml.safe_dump(data), owner=owner).errors
        assert any(e.startswith(f"{key}:") for e in errors), (key, node[last], errors)


def test_the_api_refuses_a_file_of_wrong_types_naming_every_key(owner, dataset_version):
    data, wrong = wrong_file(6)
    response = api_client(owner).post("/api/runs", {"yaml": yaml.safe_dump(data)}, content_type="application/json")
    assert response.status_code == 400
    assert unnamed(response.json()["errors"], wrong) == []
    assert not Run.objects.exists()


def test_the_import_page_refuses_a_file_of_wrong_types_naming_every_key(owner_client, owner, dataset_version):
    data, wrong = wrong_file(7)
    response = owner_client.post(reverse("run_import"), {"yaml": yaml.safe_dump(data)})
    assert response.status_code == 400
    errors = parse_run_yaml(yaml.safe_dump(data), owner=owner).errors
    assert unnamed(errors, wrong) == []
    page = response.content.decode()
    assert [e for e in errors if escape(e) not in page] == []


@pytest.mark.django_db(transaction=True)
def test_the_cli_refuses_a_file_of_wrong_types_naming_every_key(web_server, owner, dataset_version, tmp_path):
    data, wrong = wrong_file(8)
    _, token = token_create(owner=owner, name="cli", scope="write")
    path = tmp_path / "wrong.yaml"
    path.write_text(yaml.safe_dump(data))
    done = cli_submit(web_server, token, path)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line.removeprefix("grpo-web: ") for line in done.stderr.splitlines() if line.startswith("grpo-web: ")]
    assert unnamed(errors, wrong) == []
    assert not Run.objects.exists()
