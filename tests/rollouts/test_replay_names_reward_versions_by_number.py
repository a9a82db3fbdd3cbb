"""A reward replay names each reward as its user knows it: a user's function by its version number ("longer v2"),
never by the version's internal id; a built-in by its name (issue 28, item 13)."""

import pytest
from django.urls import reverse

from rewards.services import reward_create, reward_save
from runs.models import Replay
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db

V1 = "def longer(completions, **kwargs):\n    return [float(len(c)) for c in completions]\n"
V2 = "def longer(completions, **kwargs):\n    return [1.0 if '4' in c else 0.0 for c in completions]\n"


def test_the_replay_page_and_its_json_name_the_version_number(owner_client, owner, dataset_version):
    other = reward_create(owner=owner, name="other", source_code=V1.replace("longer", "other"), entrypoint="other")
    reward_save(function=other, source_code=V2.replace("longer", "other"), entrypoint="other")  # ids drift off
    function = reward_create(owner=owner, name="longer", source_code=V1, entrypoint="longer")
    v2, _ = reward_save(function=function, source_code=V2, entrypoint="longer")
    assert v2.number == 2 and v2.pk != 2
    run = make_run(owner, dataset_version, rewards=("accuracy",))
    rewards = [*run.rewards, {"name": "longer", "weight": 2.0, "version_id": v2.pk}]
    replay = Replay.objects.create(run=run, owner=owner, rewards=rewards, steps=[1], total=0)

    page = owner_client.get(reverse("run_replay", args=[run.pk, replay.pk])).content.decode()
    assert 'accuracy × 1.0</span>, <span class="replay-reward">longer v2 × 2.0' in page
    assert f"version {v2.pk}" not in page

    data = owner_client.get(reverse("run_replay_json", args=[run.pk, replay.pk])).json()
    assert [(r["label"], r["version"], r["weight"]) for r in data["rewards"]] == [
        ("accuracy", None, 1.0),
        ("longer v2", 2, 2.0),
    ]
