"""Attaching tools to a run: a tool is a function of kind "tool" whose signature is checked when it is saved; the
run form and the YAML (`tools: [calculator]`) attach the library's or a visible user's tool, pinned to a version,
and refuse one that is not a tool or not theirs to see; the YAML round trip keeps the tools."""

import pytest
from django.urls import reverse

from rewards.models import RewardFunction
from rewards.services import RewardCodeError, reward_create
from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Run
from tests.conftest import run_form_data

pytestmark = pytest.mark.django_db

WEATHER = '''def weather(city: str) -> str:
    """Today's weather.

    Args:
        city: The city's name.
    """
    return "sunny"
'''


def _yaml(tools: str) -> str:
    return f"model_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [accuracy]\nmax_steps: 2\n{tools}\n"


def test_a_tool_is_saved_only_with_a_signature_the_model_can_be_shown(owner):
    rf = reward_create(owner=owner, name="weather", source_code=WEATHER, entrypoint="weather", kind="tool")
    assert rf.kind == RewardFunction.Kind.TOOL
    with pytest.raises(RewardCodeError, match="'city' is not described"):
        reward_create(
            owner=owner,
            name="weather2",
            source_code=WEATHER.replace("city: The", "town: The"),
            entrypoint="weather",
            kind="tool",
        )
    # the same code is a fine reward function as far as saving goes: only tools need the signature
    reward_create(
        owner=owner,
        name="weather3",
        source_code="def weather(completions, **kw):\n    return []\n",
        entrypoint="weather",
    )


def test_the_editor_makes_a_blank_tool_or_a_copy_of_the_calculator(owner_client, owner):
    owner_client.post(reverse("reward_new"), {"name": "mine", "kind": "tool"})
    owner_client.post(reverse("reward_new"), {"name": "calc", "template": "calculator"})
    mine, calc = (
        RewardFunction.objects.get(owner=owner, name="mine"),
        RewardFunction.objects.get(owner=owner, name="calc"),
    )
    assert mine.kind == calc.kind == RewardFunction.Kind.TOOL
    assert calc.latest_version.entrypoint == "calculator" and "def mine(" in mine.latest_version.source
    assert mine.latest_version.entrypoint == "mine"
    page = owner_client.get(reverse("reward_detail", args=[calc.pk])).content.decode()
    assert "Called by the model while it generates" in page


def test_the_yaml_attaches_library_and_own_tools_and_refuses_others(owner, outsider, dataset_version):
    reward_create(owner=owner, name="weather", source_code=WEATHER, entrypoint="weather", kind="tool")
    reward_create(owner=outsider, name="secret", source_code=WEATHER, entrypoint="weather", kind="tool")
    imported = parse_run_yaml(_yaml("tools: [calculator, weather]"), owner=owner)
    assert imported.errors == []
    version = RewardFunction.objects.get(owner=owner, name="weather").latest_version
    assert imported.tools == [
        {"name": "calculator", "builtin": "calculator"},
        {"name": "weather", "version_id": version.pk, "version": 1},
    ]
    refused = parse_run_yaml(_yaml("tools: [secret, accuracy, nope]"), owner=owner)
    assert refused.errors == [
        "tools: you have no tool 'secret' (the library's: calculator)",
        "tools: 'accuracy' is a reward function, not a tool",
        "tools: you have no tool 'nope' (the library's: calculator)",
    ]
    assert parse_run_yaml(_yaml("tools: calculator"), owner=owner).errors == [
        "tools: a list of tool names, such as [calculator]"
    ]


def test_the_run_form_attaches_tools_and_the_yaml_keeps_them(owner, owner_client, dataset_version):
    tool = reward_create(owner=owner, name="weather", source_code=WEATHER, entrypoint="weather", kind="tool")
    page = owner_client.get(reverse("run_new")).content.decode()
    assert 'aria-label="use tool calculator"' in page and 'aria-label="use tool weather"' in page
    assert 'aria-label="use weather"' not in page  # a tool is not offered as a reward function
    from runs.lifecycle.forms import RunForm

    accuracy = RewardFunction.objects.get(owner=owner, name="accuracy")
    data = {
        **run_form_data(owner),
        "name": "with tools",
        f"reward_{accuracy.pk}": True,
        "tool_builtin_calculator": True,
        f"tool_{tool.pk}": True,
    }
    form = RunForm(data, owner=owner)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["tools"] == [
        {"name": "weather", "version_id": tool.latest_version.pk, "version": 1},
        {"name": "calculator", "builtin": "calculator"},
    ]
    run = Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "accuracy", "weight": 1.0, "builtin": "accuracy"}],
        tools=form.cleaned_data["tools"],
        config={"max_steps": 2},
        total_steps=2,
    )
    text = run_yaml(run)
    assert "tools:\n- weather\n- calculator\n" in text
    again = parse_run_yaml(text, owner=owner)
    assert [t["name"] for t in again.tools] == ["weather", "calculator"]
    clone = RunForm(owner=owner, run=run)
    assert clone.initial[f"tool_{tool.pk}"] is True and clone.initial["tool_builtin_calculator"] is True
