"""A blank reward function made on "New reward function" is named after the name typed, as its entrypoint and in its
code (TRL logs a reward under its function's name), not a placeholder every blank shares."""

import pytest
from django.urls import reverse

from rewards.models import RewardFunction

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("typed,function", [("count_digits", "count_digits"), ("count-digits", "count_digits")])
def test_a_blank_reward_is_the_function_named_as_typed(owner_client, owner, typed, function):
    answer = owner_client.post(reverse("reward_new"), {"name": typed})
    assert answer.status_code == 302
    version = RewardFunction.objects.get(owner=owner, name=typed).latest_version
    assert version.entrypoint == function and f"def {function}(completions" in version.source
    assert "my_reward" not in version.source


def test_a_name_python_cannot_call_a_function_still_makes_one(owner_client, owner):
    owner_client.post(reverse("reward_new"), {"name": "2nd"})
    version = RewardFunction.objects.get(owner=owner, name="2nd").latest_version
    assert version.entrypoint == "reward_2nd" and "def reward_2nd(" in version.source
