"""Reward functions: saving creates immutable versions, runs pin the version they used, versions can be diffed."""

import pytest
from django.urls import reverse

from rewards.models import RewardFunction
from rewards.selectors import reward_specs
from rewards.services import RewardCodeError, reward_save

pytestmark = pytest.mark.django_db

V2 = """def digit_ratio(completions, **kwargs):
    return [0.5 for _ in completions]
"""


@pytest.fixture
def reward(owner):
    return RewardFunction.objects.get(owner=owner, name="digit_ratio")


def test_a_new_user_gets_the_library_as_editable_functions(owner):
    names = set(RewardFunction.objects.filter(owner=owner).values_list("name", flat=True))
    assert {
        "accuracy",
        "think_format",
        "length_penalty",
        "letter_count",
        "language_consistency",
        "digit_ratio",
    } <= names
    accuracy = RewardFunction.objects.get(owner=owner, name="accuracy")
    assert "math_verify" in accuracy.latest_version.source
    assert accuracy.description.startswith("1.0 when the last")


def test_saving_changed_code_creates_the_next_version(owner_client, reward):
    response = owner_client.post(
        reverse("reward_detail", args=[reward.pk]), {"source": V2, "entrypoint": "digit_ratio", "description": "half"}
    )
    assert response.status_code == 302
    assert list(reward.versions.values_list("number", flat=True)) == [2, 1]
    assert reward.latest_version.source == V2


def test_saving_unchanged_code_creates_no_version(reward):
    _, created = reward_save(function=reward, source_code=reward.latest_version.source, entrypoint="digit_ratio")
    assert not created
    assert reward.versions.count() == 1


def test_a_syntax_error_names_its_line_and_saves_nothing(owner_client, reward):
    response = owner_client.post(
        reverse("reward_detail", args=[reward.pk]),
        {"source": "def digit_ratio(completions, **kw):\n    return [\n", "entrypoint": "digit_ratio"},
    )
    assert response.status_code == 400
    assert "line 2" in response.content.decode()
    assert reward.versions.count() == 1


def test_a_missing_entrypoint_is_refused(reward):
    with pytest.raises(RewardCodeError, match="no top-level function named 'nope'"):
        reward_save(function=reward, source_code=V2, entrypoint="nope")


def test_a_run_keeps_the_version_it_pinned(reward):
    v1 = reward.latest_version
    pinned = [{"name": "digit_ratio", "weight": 1.0, "version_id": v1.pk}]
    reward_save(function=reward, source_code=V2, entrypoint="digit_ratio")
    (spec,) = reward_specs(pinned)
    assert spec["source"] == v1.source != V2
    assert spec["version_id"] == v1.pk


def test_two_versions_diff(owner_client, reward):
    reward_save(function=reward, source_code=V2, entrypoint="digit_ratio")
    response = owner_client.get(reverse("reward_diff", args=[reward.pk]), {"a": 1, "b": 2})
    body = response.content.decode()
    assert response.status_code == 200
    assert "+    return [0.5 for _ in completions]" in body
    assert "-    rewards = []" in body


def test_creating_from_a_template_copies_its_code(owner_client, owner):
    response = owner_client.post(reverse("reward_new"), {"name": "my-acc", "template": "accuracy"})
    rf = RewardFunction.objects.get(owner=owner, name="my-acc")
    assert response.status_code == 302
    assert rf.latest_version.entrypoint == "accuracy" and rf.template == "accuracy"


def test_a_duplicate_name_is_refused(owner_client, owner):
    response = owner_client.post(reverse("reward_new"), {"name": "accuracy", "template": ""})
    assert response.status_code == 400
    assert RewardFunction.objects.filter(owner=owner, name="accuracy").count() == 1
