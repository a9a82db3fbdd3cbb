"""The run form and the YAML cover every GRPOConfig field of the installed TRL, derived from its dataclass (names,
help, defaults, choices, TRL's groups): a field a new TRL adds appears on the form and survives the YAML round trip
with no other work."""

import dataclasses

import pytest
from django.urls import reverse
from grpo_web_protocol import trl_fields
from trl import GRPOConfig

from rewards.models import RewardFunction
from runs.lifecycle.forms import NOT_ON_FORM, RunForm
from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Run
from tests.conftest import run_form_data
from workers.training.trl_schema import grpo_schema

pytestmark = pytest.mark.django_db


def test_every_grpoconfig_field_is_on_the_form_or_set_by_grpo_web(owner, dataset_version):
    form = RunForm(owner=owner)
    names = {f.name for f in dataclasses.fields(GRPOConfig) if f.init}
    on_form = {n for n in names if n in form.fields or f"trl_{n}" in form.fields}
    assert names - on_form <= NOT_ON_FORM
    assert len(on_form) > 150  # TRL's own groups and the inherited TrainingArguments
    groups = dict(form.trl_groups())
    assert "training" in groups and "generation" in groups and trl_fields.INHERITED in groups
    field = form.fields["trl_top_entropy_quantile"]  # TRL's help text and default come along
    assert "entropy" in field.help_text and field.widget.attrs["placeholder"] == "1.0"


def picked(owner) -> dict:
    """The run form as its user leaves it, with one reward function ticked."""
    rf = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    return {**run_form_data(owner), f"reward_{rf.pk}": "on"}


def test_other_fields_are_passed_to_grpoconfig_and_a_bad_json_one_is_named(owner_client, owner, dataset_version):
    data = {
        **picked(owner),
        "name": "extra",
        "trl_top_entropy_quantile": "0.2",
        "trl_generation_kwargs": '{"min_new_tokens": 2}',
        "trl_use_bias_correction_kl": "true",
    }
    response = owner_client.post(reverse("run_new"), {**data, "trl_generation_kwargs": "{not json"})
    assert response.status_code == 400
    assert "not JSON" in str(response.context["form"].errors["trl_generation_kwargs"])
    form = RunForm(data, owner=owner)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["config_extra"] == {
        "top_entropy_quantile": 0.2,
        "generation_kwargs": {"min_new_tokens": 2},
        "use_bias_correction_kl": True,
    }


def test_a_field_a_new_trl_adds_appears_on_the_form_and_in_the_yaml_round_trip(owner, dataset_version, monkeypatch):
    @dataclasses.dataclass
    class NewerGRPOConfig(GRPOConfig):
        """A TRL release with one more option.

        Parameters:
            > Parameters that control the training

            brand_new_option (`float`, *optional*, defaults to `0.5`):
                Something the next TRL lets you tune.
        """

        brand_new_option: float = dataclasses.field(
            default=0.5, metadata={"help": "Something the next TRL lets you tune."}
        )

    monkeypatch.setattr(trl_fields, "GRPO_SCHEMA", grpo_schema(NewerGRPOConfig))
    form = RunForm(owner=owner)
    field = form.fields["trl_brand_new_option"]
    assert field.help_text == "Something the next TRL lets you tune." and field.widget.attrs["placeholder"] == "0.5"
    assert any(f.name == "trl_brand_new_option" for f in dict(form.trl_groups())["training"])

    data = {**picked(owner), "name": "newer", "trl_brand_new_option": "0.75"}
    form = RunForm(data, owner=owner)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["config_extra"] == {"brand_new_option": 0.75}
    run = Run.objects.create(
        owner=owner,
        name="newer",
        model="tiny",
        dataset_version=dataset_version,
        rewards=form.cleaned_data["rewards"],
        config=form.cleaned_data["config"],
        config_extra=form.cleaned_data["config_extra"],
        total_steps=3,
    )
    text = run_yaml(run)
    assert "brand_new_option: 0.75" in text
    again = parse_run_yaml(text, owner=owner)
    assert again.errors == [] and again.extra == {"brand_new_option": 0.75}
    clone = RunForm(owner=owner, run=run)
    assert clone.initial["trl_brand_new_option"] == 0.75
