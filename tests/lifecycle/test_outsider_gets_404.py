"""Every object page and endpoint answers 404 to anyone but the owner."""

import pytest
from django.urls import reverse

from rewards.models import RewardFunction
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner, dataset_version):
    return Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": None}],
        config={"max_steps": 3},
        total_steps=3,
    )


def _urls(run, dataset_version, owner):
    reward = RewardFunction.objects.filter(owner=owner).first()
    return [
        reverse("dataset_detail", args=[dataset_version.dataset.pk]),
        reverse("reward_detail", args=[reward.pk]),
        reverse("reward_version", args=[reward.pk, 1]),
        reverse("reward_diff", args=[reward.pk]) + "?a=1&b=1",
        reverse("run_detail", args=[run.pk]),
        reverse("run_status_json", args=[run.pk]),
        reverse("run_metrics_json", args=[run.pk]),
        reverse("run_step_json", args=[run.pk, 1]),
        reverse("run_events", args=[run.pk]),
    ]


def test_an_outsider_gets_404_on_every_object_url(outsider_client, run, dataset_version, owner):
    for url in _urls(run, dataset_version, owner):
        assert outsider_client.get(url).status_code == 404, url


def test_the_owner_gets_each_page(owner_client, run, dataset_version, owner):
    for url in _urls(run, dataset_version, owner)[:-1]:  # the event stream never ends; its 404 is what matters
        assert owner_client.get(url).status_code == 200, url


def test_an_anonymous_visitor_is_sent_to_log_in(client, run):
    response = client.get(reverse("run_detail", args=[run.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_run_form_offers_only_the_users_own_datasets(outsider_client, dataset_version):
    response = outsider_client.get(reverse("run_new"))
    offered = response.context["form"].fields["dataset_version"].queryset
    assert dataset_version not in offered
    # by name: the option's label (the name alone also appears in built-in tools' docstrings, "arithmetic")
    assert f">{dataset_version}<" not in response.content.decode()


def test_posting_someone_elses_dataset_version_is_refused(outsider_client, dataset_version):
    response = outsider_client.post(
        reverse("run_new"), {"name": "steal", "model": "tiny", "dataset_version": dataset_version.pk}
    )
    assert response.status_code == 400
    assert not Run.objects.filter(name="steal").exists()


def test_an_outsider_cannot_test_or_read_tests_of_someone_elses_reward(outsider_client, owner, dataset_version):
    reward = RewardFunction.objects.filter(owner=owner).first()
    start = outsider_client.post(
        reverse("reward_test_start", args=[reward.pk]),
        {"source": "x", "entrypoint": "x", "dataset_version": dataset_version.pk, "rows": 1, "completions": "a"},
    )
    assert start.status_code == 404
    result = outsider_client.get(reverse("reward_test_result", args=[reward.pk, "any-task-id"]))
    assert result.status_code == 404


def test_an_outsider_gets_404_on_every_lifecycle_url(outsider_client, run, owner, dataset_version):
    other = Run.objects.create(
        owner=owner,
        name="other",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config={"max_steps": 3},
        total_steps=3,
    )
    for url in [
        reverse("run_progress_json", args=[run.pk]),
        reverse("run_clone", args=[run.pk]),
        reverse("run_diff", args=[run.pk, other.pk]),
        reverse("run_yaml", args=[run.pk]),
    ]:
        assert outsider_client.get(url).status_code == 404, url
    for name in ("run_cancel", "run_resume", "run_retry", "run_notes", "run_pin"):
        assert outsider_client.post(reverse(name, args=[run.pk])).status_code == 404, name
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and Run.objects.count() == 2
