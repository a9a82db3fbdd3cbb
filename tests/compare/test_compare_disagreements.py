"""The prompts the runs share, matched by text, and the table of those on which their solve rates differ most."""

import pytest
from django.urls import reverse

from runs.compare.selectors import prompt_hash
from runs.models import DatasetVersion
from tests.compare.compare_data import add_group, make_run

pytestmark = pytest.mark.django_db

SOLVES, FAILS = [1.0, 0.5], [0.0, 0.5]  # [accuracy, digit_ratio]


@pytest.fixture
def other_dataset(dataset_version):
    return DatasetVersion.objects.create(
        dataset=dataset_version.dataset,
        number=2,
        path=dataset_version.path,
        columns=dataset_version.columns,
        row_count=dataset_version.row_count,
    )


@pytest.fixture
def runs(owner, dataset_version, other_dataset):
    """Run a and run b on different datasets: they share the prompts "two" and "three" only."""
    a = make_run(owner, dataset_version, "a")
    b = make_run(owner, other_dataset, "b")
    add_group(a, 1, "one", [SOLVES, FAILS, FAILS, FAILS])
    add_group(a, 1, "two", [SOLVES, SOLVES, FAILS, FAILS])
    add_group(a, 2, "two", [SOLVES, SOLVES, SOLVES, SOLVES])  # two: 6 of 8 over both steps
    add_group(a, 2, "three", [SOLVES, FAILS, FAILS, FAILS])  # three: 1 of 4
    add_group(b, 1, "two", [FAILS, FAILS, FAILS, FAILS])  # two: 0 of 4
    add_group(b, 1, "three", [SOLVES, FAILS, FAILS, FAILS])  # three: 1 of 4, as a: no disagreement
    add_group(b, 2, "four", [SOLVES, SOLVES, SOLVES, SOLVES])
    return a, b


def table(client, runs, **params):
    response = client.get(reverse("run_compare_prompts"), {"runs": ",".join(str(r.pk) for r in runs), **params})
    assert response.status_code == 200, response.content
    return response.json()


def test_only_prompts_every_run_sampled_are_matched(owner_client, runs):
    data = table(owner_client, runs)
    assert [s["preview"] for s in data["shared"]] == ["three", "two"]
    assert [s["hash"] for s in data["shared"]] == [prompt_hash("three"), prompt_hash("two")]
    assert [(r["name"], r["prompts"]) for r in data["runs"]] == [("a", 3), ("b", 3)]


def test_the_table_lists_prompts_where_one_run_solves_and_another_does_not(owner_client, runs):
    a, b = runs
    data = table(owner_client, runs)
    assert data["criterion"]["solved_by"] == "accuracy" and data["criterion"]["threshold"] == 1.0
    assert data["criterion"]["text"] == "A completion solves its prompt when its accuracy reward is at least 1."
    assert data["disagreements"] == [
        {
            "hash": prompt_hash("two"),
            "prompt": "two",
            "spread": 0.75,
            "runs": [{"id": a.pk, "n": 8, "solved": 6, "rate": 0.75}, {"id": b.pk, "n": 4, "solved": 0, "rate": 0.0}],
        }
    ]


def test_the_largest_disagreement_comes_first(owner_client, runs):
    a, b = runs
    add_group(b, 3, "three", [SOLVES, SOLVES, SOLVES, SOLVES])  # b: 5 of 8 on three, a: 1 of 4
    rows = table(owner_client, runs)["disagreements"]
    assert [(r["prompt"], r["spread"]) for r in rows] == [("two", 0.75), ("three", 0.375)]


def test_the_criterion_is_a_url_parameter(owner_client, runs):
    a, b = runs
    # on the total reward (accuracy + digit_ratio = 1.5 or 0.5), at least 1: the same verdicts
    assert table(owner_client, runs, solved_by="reward")["disagreements"][0]["runs"][0]["solved"] == 6
    # at least 0.5 every completion solves: nobody disagrees
    lenient = table(owner_client, runs, solved_by="reward", threshold="0.5")
    assert lenient["criterion"]["text"] == (
        "A completion solves its prompt when its total (weighted) reward is at least 0.5."
    )
    assert lenient["disagreements"] == []
    # digit_ratio at least 0.5: every completion solves too
    assert table(owner_client, runs, solved_by="digit_ratio", threshold="0.5")["disagreements"] == []


def test_a_function_reward_is_read_at_its_place_in_each_runs_order(owner_client, owner, dataset_version):
    a = make_run(owner, dataset_version, "a", rewards=("accuracy", "digit_ratio"))
    b = make_run(owner, dataset_version, "b", rewards=("digit_ratio", "accuracy"))
    add_group(a, 1, "p", [[1.0, 0.0], [1.0, 0.0]])
    add_group(b, 1, "p", [[1.0, 0.0], [1.0, 0.0]])  # b: digit_ratio 1, accuracy 0
    row = table(owner_client, [a, b])["disagreements"][0]
    assert [(r["solved"], r["n"]) for r in row["runs"]] == [(2, 2), (0, 2)]


def test_an_abstention_never_solves(owner_client, owner, dataset_version):
    a = make_run(owner, dataset_version, "a")
    b = make_run(owner, dataset_version, "b")
    add_group(a, 1, "p", [[None, 1.0], [1.0, 1.0]])
    add_group(b, 1, "p", [[None, 1.0], [None, 1.0]])
    row = table(owner_client, [a, b])["disagreements"][0]
    assert [r["solved"] for r in row["runs"]] == [1, 0]


def test_without_accuracy_in_every_run_the_total_reward_decides(owner_client, owner, dataset_version):
    a = make_run(owner, dataset_version, "a")
    b = make_run(owner, dataset_version, "b", rewards=("digit_ratio",))
    data = table(owner_client, [a, b])
    assert data["criterion"]["solved_by"] == "reward"
    response = owner_client.get(reverse("run_compare_prompts"), {"runs": f"{a.pk},{b.pk}", "solved_by": "accuracy"})
    assert response.status_code == 400
    assert response.json()["error"] == ("solved_by: give one of reward, digit_ratio (a reward every compared run has)")


def test_the_page_states_the_criterion(owner_client, runs):
    a, b = runs
    response = owner_client.get(
        reverse("run_compare"), {"runs": f"{a.pk},{b.pk}", "solved_by": "reward", "threshold": "1.5"}
    )
    assert (
        "A completion solves its prompt when its total (weighted) reward is at least 1.5." in response.content.decode()
    )
