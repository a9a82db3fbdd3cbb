"""The dashboard's runs: a table searched, filtered and sorted on the server, with the latest reward, the latest
mean@k and a sparkline of the reward; only the user's own runs."""

import pytest
from django.urls import reverse

from runs.lifecycle.selectors import dashboard_runs, sparkline

pytestmark = pytest.mark.django_db


def names(table):
    return [row.run.name for row in table.rows]


def test_runs_come_with_their_latest_reward_mean_at_k_and_curve(owner, runs):
    rows = {row.run.name: row for row in dashboard_runs(owner).rows}
    assert (rows["alpha"].reward, rows["alpha"].mean_at_k) == (pytest.approx(0.7), pytest.approx(0.625))
    assert (rows["beta"].reward, rows["beta"].mean_at_k) == (pytest.approx(0.2), None)
    assert rows["alpha"].spark == "0.0,19.0 50.0,13.0 100.0,1.0" and rows["gamma"].spark == ""  # up is less y


@pytest.mark.parametrize(
    "sort, order",
    [
        ("-reward", ["alpha", "beta", "gamma"]),
        ("reward", ["beta", "alpha", "gamma"]),  # no reward: last either way
        ("name", ["alpha", "beta", "gamma"]),
        ("-name", ["gamma", "beta", "alpha"]),
        ("-progress", ["alpha", "beta", "gamma"]),
    ],
)
def test_runs_sort_by_any_column(owner, runs, sort, order):
    assert names(dashboard_runs(owner, sort=sort)) == order


def test_runs_without_a_mean_at_k_sort_after_those_with_one(owner, runs):
    assert names(dashboard_runs(owner, sort="-mean_at_k"))[0] == "alpha"
    assert names(dashboard_runs(owner, sort="mean_at_k"))[0] == "alpha"


def test_search_and_filters_narrow_the_table(owner, runs, dataset_version):
    assert names(dashboard_runs(owner, q="ALP")) == ["alpha"]
    assert names(dashboard_runs(owner, status="failed")) == ["beta"]
    assert len(dashboard_runs(owner, dataset=str(dataset_version.dataset_id)).rows) == 3
    assert dashboard_runs(owner, model="no such model").rows == []
    assert len(dashboard_runs(owner, status="nonsense", sort="nonsense", dataset="x").rows) == 3  # ignored


def test_the_page_shows_the_table_and_an_outsider_sees_none_of_it(owner_client, runs):
    page = owner_client.get(reverse("dashboard"), {"sort": "-reward"}).content.decode()
    assert page.index(">alpha<") < page.index(">beta<") < page.index(">gamma<")
    assert "0.625" in page and page.count('class="sparkline"') == 2


def test_an_outsider_sees_none_of_the_owners_runs(outsider_client, runs):
    page = outsider_client.get(reverse("dashboard")).content.decode()
    assert "alpha" not in page and "No runs yet." in page


def test_a_sparkline_keeps_at_most_forty_points_and_the_last():
    points = [(step, float(step % 7)) for step in range(1, 501)]
    line = sparkline(points).split()
    assert len(line) == 40 and line[-1].startswith("100.0,")


def test_a_search_with_a_nul_searches_without_it(owner_client, runs):
    page = owner_client.get(reverse("dashboard"), {"q": "al\x00pha"}).content.decode()
    assert ">alpha<" in page and ">beta<" not in page
