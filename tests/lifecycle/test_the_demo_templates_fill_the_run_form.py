"""The run form's demo templates fill it with a run that shows its feature: the calculator demo at a learning rate
at which tiny-tools keeps calling the tool (TRL's form default, 1e-2, trained the calls away by step 3), and the
flips demo with prompts sampled again so that one can go from all wrong to solved."""

import io
import json

import pytest
from django.urls import reverse
from grpo_web_protocol.demo_data import arithmetic_rows, arithmetic_tool_rows

from runs.datasets.services import dataset_import

pytestmark = pytest.mark.django_db


def _import(owner, name, rows):
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return dataset_import(owner=owner, name=name, stream=io.BytesIO(data), source_name="rows.jsonl")


def test_the_calculator_demo_fills_the_tools_model_the_tool_and_a_rate_that_keeps_tool_calls(owner_client, owner):
    tools_set = _import(owner, "arithmetic with a calculator (demo)", arithmetic_tool_rows(8))
    _import(owner, "arithmetic (demo)", arithmetic_rows(8))

    response = owner_client.get(reverse("run_new") + "?demo=calculator")

    assert response.status_code == 200
    form = response.context["form"]
    assert form.initial["model"] == "tiny-tools" and form.initial["dataset_version"] == tools_set.pk
    assert form.initial["tool_builtin_calculator"] is True and form.initial["learning_rate"] == 1e-4
    accuracy = next(rf for rf in form.reward_functions if rf.name == "accuracy")
    assert form.initial[f"reward_{accuracy.pk}"] is True
    assert 'href="/runs/new/?demo=calculator"' in owner_client.get(reverse("run_new")).content.decode()


def test_the_flips_demo_samples_each_training_prompt_again_within_its_steps(owner_client, owner):
    _import(owner, "arithmetic (demo)", arithmetic_rows(8))
    form = owner_client.get(reverse("run_new") + "?demo=flips").context["form"]
    prompts_a_step = form.initial["per_device_train_batch_size"] // form.initial["num_generations"]
    assert form.initial["model"] == "tiny-sft" and prompts_a_step * form.initial["max_steps"] > 180  # the demo's 180


def test_a_demo_template_without_the_demo_data_says_what_is_missing(owner_client):
    response = owner_client.get(reverse("run_new") + "?demo=calculator")
    assert "dataset_name: you have no dataset named &#x27;arithmetic with a calculator (demo)&#x27;" in (
        response.content.decode()
    )


@pytest.mark.parametrize("demo", ["nope", "../calculator", "calculator\x00", "x" * 5000])
def test_an_unknown_demo_name_leaves_the_form_as_it_is(owner_client, demo):
    response = owner_client.get(reverse("run_new"), {"demo": demo})
    form = response.context["form"]
    assert response.status_code == 200 and form.get_initial_for_field(form.fields["model"], "model") == "tiny"
    assert "import-errors" not in response.content.decode()
