"""The reward editor's lint: syntax errors, undefined and unused names, a missing entrypoint, each with its line and
column; the code is parsed, never run."""

import pytest
from django.urls import reverse

from rewards.library import ENVIRONMENTS
from rewards.library import source as library_source
from rewards.lint import lint
from rewards.models import RewardFunction
from rewards.services import MAX_SOURCE_BYTES

CLEAN = """def my_reward(completions, **kwargs):
    return [float(len(c) > 0) for c in completions]
"""


def test_clean_code_has_no_problems():
    assert lint(CLEAN, "my_reward") == []


def test_a_syntax_error_names_its_line_and_column():
    assert lint("def my_reward(completions, **kwargs):\n    return [1.0 for c in completions\n", "my_reward") == [
        {"line": 2, "col": 11, "severity": "error", "message": "syntax error: '[' was never closed"}
    ]


def test_an_undefined_name_is_an_error_and_an_unused_import_a_warning():
    code = "import os\n\ndef my_reward(completions, **kwargs):\n    return [scor(c) for c in completions]\n"
    assert lint(code, "my_reward") == [
        {"line": 1, "col": 0, "severity": "warning", "message": "'os' imported but unused"},
        {"line": 4, "col": 12, "severity": "error", "message": "undefined name 'scor'"},
    ]


def test_a_missing_entrypoint_is_named():
    assert lint(CLEAN, "other")[-1]["message"] == "no top-level function named 'other' (the entrypoint)"


@pytest.mark.parametrize(
    "code, message",
    [
        ("x = " + "(" * 5000 + ")" * 5000, "syntax error: too many nested parentheses"),
        ("x = 1\x00", "syntax error: source code string cannot contain null bytes"),
        ("#" * (MAX_SOURCE_BYTES + 1), f"the code is {MAX_SOURCE_BYTES + 1} bytes; the limit is {MAX_SOURCE_BYTES}"),
    ],
)
def test_hostile_code_gets_a_message_not_a_crash(code, message):
    assert lint(code, "my_reward")[0]["message"] == message


@pytest.mark.django_db
def test_the_lint_endpoint_answers_the_owner(owner_client, owner):
    url = reverse("reward_lint", args=[RewardFunction.objects.filter(owner=owner).first().pk])
    response = owner_client.post(url, {"source": "def f(completions, **kw):\n    return x\n", "entrypoint": "f"})
    assert response.json() == {
        "diagnostics": [{"line": 2, "col": 11, "severity": "error", "message": "undefined name 'x'"}]
    }
    assert owner_client.get(url).status_code == 405


@pytest.mark.django_db
def test_the_lint_endpoint_is_404_to_an_outsider(outsider_client, owner):
    url = reverse("reward_lint", args=[RewardFunction.objects.filter(owner=owner).first().pk])
    assert outsider_client.post(url, {"source": CLEAN, "entrypoint": "my_reward"}).status_code == 404


@pytest.mark.django_db
def test_an_environments_entrypoint_is_its_class_the_librarys_own_included(owner_client, owner):
    code = library_source("calculator_session")
    environment = RewardFunction.objects.create(
        owner=owner,
        name="calc-env",
        kind=RewardFunction.Kind.ENVIRONMENT,
    )
    url = reverse("reward_lint", args=[environment.pk])
    answer = owner_client.post(url, {"source": code, "entrypoint": ENVIRONMENTS["calculator_session"]}).json()
    assert answer == {"diagnostics": []}
    missing = owner_client.post(url, {"source": code, "entrypoint": "evaluate"}).json()["diagnostics"]
    assert missing[-1]["message"] == "no top-level class named 'evaluate' (the entrypoint)"  # a function is no class
