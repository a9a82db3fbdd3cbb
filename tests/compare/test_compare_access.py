"""The comparison and its endpoints answer 404 unless the user owns every compared run."""

import pytest
from django.urls import reverse

from runs.compare.selectors import prompt_hash
from tests.compare.compare_data import add_group, make_run

pytestmark = pytest.mark.django_db

ENDPOINTS = [
    "run_compare",
    "run_compare_metrics",
    "run_compare_prompts",
    "run_compare_transcripts",
    "run_compare_events",
]


@pytest.fixture
def runs(owner, dataset_version):
    a, b = make_run(owner, dataset_version, "a"), make_run(owner, dataset_version, "b")
    for run in (a, b):
        add_group(run, 1, "shared", [[1.0, 0.0], [0.0, 0.0]])
    return a, b


def _query(*runs):
    return {"runs": ",".join(str(r.pk) for r in runs), "prompt": prompt_hash("shared")}


def test_the_owner_gets_the_page_and_each_endpoint(owner_client, runs):
    for name in ENDPOINTS[:-1]:  # the event stream never ends; its 404 is what matters
        assert owner_client.get(reverse(name), _query(*runs)).status_code == 200, name


def test_an_outsider_gets_404_on_the_page_and_every_endpoint(outsider_client, runs):
    for name in ENDPOINTS:
        assert outsider_client.get(reverse(name), _query(*runs)).status_code == 404, name


def test_one_run_of_someone_else_among_ones_own_is_a_404(outsider_client, outsider, dataset_version, runs):
    mine = make_run(outsider, dataset_version, "mine")
    add_group(mine, 1, "shared", [[1.0, 0.0], [0.0, 0.0]])
    for name in ENDPOINTS:
        assert outsider_client.get(reverse(name), _query(mine, runs[0])).status_code == 404, name


def test_an_anonymous_visitor_is_sent_to_log_in(client, runs):
    response = client.get(reverse("run_compare"), _query(*runs))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_dashboard_offers_to_compare_the_runs(owner_client, runs):
    html = owner_client.get(reverse("dashboard")).content.decode()
    assert html.count('name="runs"') == 2
    assert 'id="compare-runs"' in html


def test_ticked_runs_land_on_the_shareable_url(owner_client, runs):
    a, b = runs
    response = owner_client.get(reverse("run_compare"), {"runs": [str(b.pk), str(a.pk)]})
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('run_compare')}?runs={a.pk},{b.pk}"


@pytest.mark.parametrize("runs_param", ["", "1", "1,2,3,4,5,6,7", "1,x"])
def test_the_page_explains_a_selection_it_cannot_compare(owner_client, runs_param):
    response = owner_client.get(reverse("run_compare"), {"runs": runs_param})
    assert response.status_code == 400
    assert "runs:" in response.content.decode()
