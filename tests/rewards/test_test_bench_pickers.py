"""The reward editor's Test bench reads no run or dataset itself: its pickers come from the JSON API (what the user
may see), and the sandbox task checks the dataset version and run it is given belong to the user."""

import pytest

from rewards.models import RewardFunction
from workers.reward_checks import reward_test_rows

pytestmark = pytest.mark.django_db

GOOD = "def f(completions, **kwargs):\n    return [1.0 for _ in completions]\n"


def test_the_api_lists_every_version_for_the_pickers(owner_client, dataset_version):
    listed = owner_client.get("/api/datasets?versions=true").json()
    assert [(d["name"], [v["id"] for v in d["versions"]]) for d in listed] == [("arithmetic", [dataset_version.pk])]
    assert owner_client.get("/api/datasets").json()[0]["versions"] is None


def test_an_outsider_lists_none_of_them(outsider_client, dataset_version):
    assert outsider_client.get("/api/datasets?versions=true").json() == []


def test_the_task_refuses_a_dataset_version_that_is_not_the_users(outsider, dataset_version):
    result = reward_test_rows(
        owner_id=outsider.pk,
        function_id=1,
        source=GOOD,
        entrypoint="f",
        dataset_version_id=dataset_version.pk,
        rows=2,
        completions=["a"],
    )
    assert result["error"] == "no such dataset version" and result["rows"] == []


def test_the_editor_page_renders_no_other_users_dataset_or_run(outsider_client, owner, dataset_version, outsider):
    mine = RewardFunction.objects.filter(owner=outsider).first()
    page = outsider_client.get(f"/rewards/{mine.pk}/").content.decode()
    assert "arithmetic v" not in page and 'id="test-dataset"' in page
