"""A reward function is deleted by its owner with its versions; while a run (anyone's) pins one of its versions, as
a reward, a tool or its environment, the delete is refused naming the run. Anyone but the owner gets 404."""

import pytest
from django.urls import reverse

from grpo_web.removal import DeleteRefused
from rewards.models import RewardFunction, RewardFunctionVersion, RewardShare
from rewards.services import reward_function_delete
from tests.conftest import logged_in
from tests.deletion.conftest import pinning
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


def test_an_unpinned_reward_function_goes_with_its_versions(owner, reward):
    page = logged_in(owner).get(reverse("reward_delete", args=[reward.pk])).content.decode()
    assert f"the reward function &#x27;{reward.name}&#x27;" in page and "1 version" in page
    assert logged_in(owner).post(reverse("reward_delete", args=[reward.pk])).status_code == 302
    assert not RewardFunction.objects.filter(pk=reward.pk).exists()
    assert not RewardFunctionVersion.objects.filter(function_id=reward.pk).exists()


def test_a_version_a_run_pins_is_refused_naming_the_run(owner, member, reward, dataset_version):
    run = make_run(member, dataset_version, name="pinned")
    run.rewards = pinning(reward)
    run.save(update_fields=["rewards"])
    with pytest.raises(DeleteRefused) as refused:
        reward_function_delete(function=reward, user=owner)
    assert refused.value.reasons == [
        f"the reward function '{reward.name}' is used by run 'pinned' of member: delete that first"
    ]
    assert logged_in(owner).post(reverse("reward_delete", args=[reward.pk])).status_code == 409
    assert RewardFunction.objects.filter(pk=reward.pk).exists()


def test_a_tool_a_run_calls_is_refused_too(owner, reward, dataset_version):
    run = make_run(owner, dataset_version, name="with a tool")
    run.tools = [{"name": reward.name, "version_id": reward.latest_version.pk, "version": 1}]
    run.save(update_fields=["tools"])
    with pytest.raises(DeleteRefused, match="used by run 'with a tool' of owner"):
        reward_function_delete(function=reward, user=owner)


def test_only_the_owner_deletes_a_reward_function(owner, member, outsider, team, reward):
    RewardShare.objects.create(function=reward, team=team, can_write=True)
    url = reverse("reward_delete", args=[reward.pk])
    for user in (member, outsider):
        assert logged_in(user).get(url).status_code == 404
        assert logged_in(user).post(url).status_code == 404
    assert RewardFunction.objects.filter(pk=reward.pk).exists()
