"""TRL config YAML in and out, the submit_run command, and the checks that name the field."""

import dataclasses

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from grpo_web_protocol.trl_fields import GRPO_CONFIG_FIELDS, GRPO_SCHEMA

from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Run

pytestmark = pytest.mark.django_db

TRL_CONFIG = """
# as a TRL user writes it for `trl grpo --config`
model_name_or_path: tiny
dataset_name: arithmetic
reward_funcs: [digit_ratio, think_format]
reward_weights: [1.0, 0.5]
output_dir: /somewhere/else
report_to: wandb
learning_rate: 5.0e-3
num_generations: 4
per_device_train_batch_size: 8
max_steps: 3
beta: 0.04
bf16: false
adam_beta2: 0.99
"""


def test_the_field_list_matches_the_installed_trl():
    from trl import GRPOConfig

    assert GRPO_CONFIG_FIELDS == {f.name for f in dataclasses.fields(GRPOConfig)}
    from workers.training.trl_schema import grpo_schema

    # the stored schema is the installed TRL's: after a TRL upgrade, `python -m workers.training.trl_schema --write`
    assert GRPO_SCHEMA == grpo_schema()
    from grpo_web_protocol.config import LR_SCHEDULERS
    from transformers.trainer_utils import SchedulerType

    assert set(LR_SCHEDULERS) == {s.value for s in SchedulerType}  # the schedules the GRPO and SFT forms offer


def test_a_trl_config_comes_in_unchanged(owner, dataset_version):
    imported = parse_run_yaml(TRL_CONFIG, owner=owner)
    assert imported.errors == []
    assert imported.model == "tiny" and imported.dataset_version == dataset_version
    assert [(r["name"], r["weight"]) for r in imported.rewards] == [("digit_ratio", 1.0), ("think_format", 0.5)]
    assert imported.config["learning_rate"] == 5e-3 and imported.config["num_generations"] == 4
    assert imported.config["beta"] == 0.04 and imported.config["bf16"] == "no"
    assert imported.extra == {"adam_beta2": 0.99}  # a GRPOConfig field the form lacks passes through
    assert any(n.startswith("output_dir:") for n in imported.notes)
    assert any(n.startswith("report_to:") for n in imported.notes)


@pytest.mark.parametrize(
    "text, error",
    [
        (
            "model_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [digit_ratio]\nlearning_rat: 0.1\n",
            "learning_rat: not a GRPOConfig field",
        ),
        ("dataset_name: nope\nreward_funcs: [digit_ratio]\n", "dataset_name: you have no dataset named 'nope'"),
        ("dataset_name: arithmetic\nreward_funcs: [missing]\n", "reward_funcs: you have no reward function 'missing'"),
        (
            "dataset_name: arithmetic\nreward_funcs: [digit_ratio]\nnum_generations: many\n",
            "num_generations: 'many' is not a whole number (int)",
        ),
        ("dataset_name: arithmetic\n  reward_funcs: [\n", "line 2: not valid YAML"),
    ],
)
def test_a_bad_config_names_the_key(owner, dataset_version, text, error):
    assert any(e.startswith(error) for e in parse_run_yaml(text, owner=owner).errors)


@pytest.mark.parametrize(
    "name, says",
    [
        # TRL's own factory (trl.rewards), as TRL's docs build a reward that takes settings
        (
            "trl.rewards.get_soft_overlong_punishment",
            "end the source with `soft_overlong_punishment = get_soft_overlong_punishment(...)`, your settings as "
            "arguments; then name 'soft_overlong_punishment' here",
        ),
        ("get_cosine_scaled_reward", "end the source with `cosine_scaled_reward = get_cosine_scaled_reward(...)`"),
        # an import path, as TRL's CLI takes one
        (
            "my_lib.rewards.custom_reward",
            "'my_lib.rewards.custom_reward' is an import path (TRL's CLI imports it): paste the function's source "
            "into a new reward named 'custom_reward'",
        ),
    ],
)
def test_a_reward_trl_s_cli_imports_says_what_to_paste(owner, dataset_version, name, says):
    errors = parse_run_yaml(f"dataset_name: arithmetic\nreward_funcs: [{name}]\n", owner=owner).errors
    (error,) = [e for e in errors if e.startswith("reward_funcs:")]
    assert error.startswith(f"reward_funcs: you have no reward function {name!r}. ") and says in error, error


def test_export_then_import_gives_the_same_setup(owner, dataset_version):
    imported = parse_run_yaml(TRL_CONFIG, owner=owner)
    run = Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=imported.rewards,
        config=imported.config,
        config_extra=imported.extra,
        total_steps=3,
    )
    again = parse_run_yaml(run_yaml(run), owner=owner)
    assert again.errors == []
    assert (again.config, again.extra, again.rewards) == (run.config, run.config_extra, run.rewards)


def test_the_yaml_download_and_import_page(owner_client, owner, dataset_version):
    imported = parse_run_yaml(TRL_CONFIG, owner=owner)
    run = Run.objects.create(
        owner=owner,
        name="exported",
        model="tiny",
        dataset_version=dataset_version,
        rewards=imported.rewards,
        config=imported.config,
        total_steps=3,
    )
    text = owner_client.get(reverse("run_yaml", args=[run.pk])).content.decode()
    assert "learning_rate: 0.005" in text and "reward_funcs:" in text
    page = owner_client.post(reverse("run_import"), {"yaml": text}).content.decode()
    assert 'value="exported"' in page and 'name="learning_rate" value="0.005"' in page


def test_the_run_form_names_the_field_of_a_bad_batch(owner_client, dataset_version, owner):
    from rewards.models import RewardFunction

    rf = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    form = {
        "name": "x",
        "model": "tiny",
        "dataset_version": dataset_version.pk,
        "requested_gpus": 0,
        f"reward_{rf.pk}": "on",
        f"weight_{rf.pk}": 1.0,
        f"version_{rf.pk}": 1,
    }
    from grpo_web_protocol.config import GRPO_FIELDS

    for name, f in GRPO_FIELDS.items():
        if f.default is not None and not isinstance(f.default, bool):
            form.setdefault(name, f.default)
    form.update(num_generations=3, per_device_train_batch_size=8)
    response = owner_client.post(reverse("run_new"), form)
    assert response.status_code == 400
    assert "must be a multiple of num_generations (3)" in response.content.decode()
    form.update(num_generations=1, per_device_train_batch_size=8)
    assert (
        "Ensure this value is greater than or equal to 2"
        in owner_client.post(reverse("run_new"), form).content.decode()
    )


def test_submit_run_refuses_a_bad_config_with_its_reasons(owner, dataset_version, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("dataset_name: arithmetic\nreward_funcs: [digit_ratio]\nnot_a_field: 1\n")
    with pytest.raises(CommandError, match="not_a_field: not a GRPOConfig field"):
        call_command("submit_run", str(path), "--user", owner.username)
    assert not Run.objects.exists()
