"""Teams: a dataset, reward function or run shared with a team is seen by its members (read) or also changed by them
(read and write); everyone else keeps getting 404, and a share that ends ends the access."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from rewards.models import RewardFunction
from runs.models import Run
from tests.api.conftest import api_client
from tests.conftest import logged_in, run_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(owner, member):
    client = logged_in(owner)
    client.post(reverse("teams"), {"name": "math  lab"})
    team = Group.objects.get(name="math lab")
    client.post(reverse("team_member_add", args=[team.pk]), {"username": "member"})
    return team


@pytest.fixture
def run(owner, dataset_version):
    return Run.objects.create(
        owner=owner,
        name="shared run",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0}],
        config={"max_steps": 2},
        total_steps=2,
        status=Run.Status.RUNNING,
    )


def share(owner, url, team, access):
    return logged_in(owner).post(url, {"team": team.pk, "access": access}, follow=True)


def test_a_team_is_made_and_members_are_added_by_username(team, owner, member, django_user_model):
    assert set(team.user_set.values_list("username", flat=True)) == {"owner", "member"}
    page = logged_in(member).get(reverse("teams")).content.decode()
    assert "math lab" in page and "owner" in page
    stranger = django_user_model.objects.create_user(username="stranger", password="x")
    # a non-member cannot add anyone, nor tell the team exists
    assert (
        logged_in(stranger).post(reverse("team_member_add", args=[team.pk]), {"username": "stranger"}).status_code
        == 404
    )
    assert not team.user_set.filter(pk=stranger.pk).exists()


@pytest.mark.parametrize("name, error", [("", "name the team"), ("math lab", "exists already")])
def test_a_team_needs_a_free_name(team, owner, name, error):
    response = logged_in(owner).post(reverse("teams"), {"name": name}, follow=True)
    assert error in response.content.decode()
    assert Group.objects.count() == 1


def test_adding_an_unknown_user_says_so(team, owner):
    response = logged_in(owner).post(reverse("team_member_add", args=[team.pk]), {"username": "nobody"}, follow=True)
    assert "no user named &#x27;nobody&#x27;" in response.content.decode()


def test_a_run_shared_for_reading_is_seen_but_not_changed(team, owner, member, outsider, run):
    response = share(owner, reverse("run_share", args=[run.pk]), team, "read")
    assert "Shared with math lab (read)" in response.content.decode()
    reader = logged_in(member)
    page = reader.get(reverse("run_detail", args=[run.pk]))
    assert page.status_code == 200 and "shared by owner" in page.content.decode()
    assert reader.get(reverse("run_status_json", args=[run.pk])).status_code == 200
    assert reader.get(reverse("run_rollouts", args=[run.pk])).status_code == 200
    dashboard = reader.get(reverse("dashboard") + "?scope=shared").content.decode()
    assert "shared run" in dashboard
    assert "shared run" not in reader.get(reverse("dashboard") + "?scope=mine").content.decode()
    assert [r["name"] for r in api_client(member).get("/api/runs", {"scope": "shared"}).json()] == ["shared run"]
    # a reader cannot cancel, evaluate, or change the reflection phrases: the same 404 as an outsider
    assert reader.post(reverse("run_cancel", args=[run.pk]), {"confirm": "yes"}).status_code == 404
    assert reader.post(reverse("run_reflection", args=[run.pk]), {"phrases": "hmm"}).status_code == 404
    assert api_client(member).post(f"/api/runs/{run.pk}/cancel").status_code == 404
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert logged_in(outsider).get(reverse("run_detail", args=[run.pk])).status_code == 404
    assert api_client(outsider).get(f"/api/runs/{run.pk}").status_code == 404


def test_a_run_shared_for_writing_can_be_cancelled_by_a_member(team, owner, member, run):
    share(owner, reverse("run_share", args=[run.pk]), team, "write")
    response = api_client(member).post(f"/api/runs/{run.pk}/cancel")
    assert response.status_code == 200
    run.refresh_from_db()
    assert run.cancel_requested_at is not None or run.status == Run.Status.CANCELLED


def test_only_the_owner_shares_and_only_with_their_own_teams(team, owner, member, outsider, run):
    share(owner, reverse("run_share", args=[run.pk]), team, "read")
    response = logged_in(member).post(
        reverse("run_share", args=[run.pk]), {"team": team.pk, "access": "write"}, follow=True
    )
    assert "only the owner can share it" in response.content.decode()
    assert not run.shares.get().can_write
    other = Group.objects.create(name="not mine")
    other.user_set.add(outsider)
    response = share(owner, reverse("run_share", args=[run.pk]), other, "read")
    assert "pick one of your teams" in response.content.decode()
    assert run.shares.count() == 1


def test_stopping_a_share_or_leaving_the_team_ends_the_access(team, owner, member, run, dataset_version):
    share(owner, reverse("run_share", args=[run.pk]), team, "read")
    share(owner, reverse("dataset_share", args=[dataset_version.dataset.pk]), team, "read")
    reader = logged_in(member)
    assert reader.get(reverse("run_detail", args=[run.pk])).status_code == 200
    share(owner, reverse("run_share", args=[run.pk]), team, "none")
    assert reader.get(reverse("run_detail", args=[run.pk])).status_code == 404
    assert reader.get(reverse("dataset_detail", args=[dataset_version.dataset.pk])).status_code == 200
    reader.post(reverse("team_leave", args=[team.pk]))
    assert reader.get(reverse("dataset_detail", args=[dataset_version.dataset.pk])).status_code == 404


def test_the_last_member_to_leave_removes_the_team_and_its_shares(team, owner, member, run):
    share(owner, reverse("run_share", args=[run.pk]), team, "read")
    logged_in(member).post(reverse("team_leave", args=[team.pk]))
    logged_in(owner).post(reverse("team_leave", args=[team.pk]))
    assert not Group.objects.exists() and not run.shares.exists()


def test_a_shared_dataset_can_be_trained_on_but_not_changed_by_a_reader(team, owner, member, dataset_version):
    share(owner, reverse("dataset_share", args=[dataset_version.dataset.pk]), team, "read")
    reader = logged_in(member)
    form = reader.get(reverse("run_new"))
    assert str(dataset_version) in form.content.decode()
    assert run_form_data(member)["dataset_version"] == dataset_version.pk
    assert reader.get(reverse("dataset_upload_version", args=[dataset_version.dataset.pk])).status_code == 404
    mapping = reverse("dataset_mapping", args=[dataset_version.dataset.pk, dataset_version.number])
    assert reader.get(mapping).status_code == 200
    assert reader.post(mapping, {"action": "save"}).status_code == 404


def test_a_reward_shared_for_reading_opens_read_only_and_for_writing_takes_new_versions(team, owner, member):
    rf = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    share(owner, reverse("reward_share", args=[rf.pk]), team, "read")
    reader = logged_in(member)
    page = reader.get(reverse("reward_detail", args=[rf.pk])).content.decode()
    assert "Read only" in page and "Save as a new version" not in page
    code = rf.latest_version.source + "\n# edited\n"
    data = {"source": code, "entrypoint": rf.latest_version.entrypoint, "description": "x"}
    assert reader.post(reverse("reward_detail", args=[rf.pk]), data).status_code == 404
    share(owner, reverse("reward_share", args=[rf.pk]), team, "write")
    assert reader.post(reverse("reward_detail", args=[rf.pk]), data).status_code == 302
    assert rf.versions.count() == 2
    listed = {(r["name"], r["owner"]) for r in api_client(member).get("/api/rewards").json()}
    assert ("digit_ratio", "owner") in listed and ("digit_ratio", "member") in listed


def test_a_shared_reward_with_the_name_of_ones_own_cannot_be_picked_twice(team, owner, member, dataset_version):
    theirs = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    mine = RewardFunction.objects.get(owner=member, name="digit_ratio")
    share(owner, reverse("reward_share", args=[theirs.pk]), team, "read")
    share(owner, reverse("dataset_share", args=[dataset_version.dataset.pk]), team, "read")
    data = {**run_form_data(member), f"reward_{mine.pk}": True, f"reward_{theirs.pk}": True}
    response = logged_in(member).post(reverse("run_new"), data)
    assert response.status_code == 400
    assert "Two reward functions are named &#x27;digit_ratio&#x27;" in response.content.decode()
    assert not Run.objects.exists()
