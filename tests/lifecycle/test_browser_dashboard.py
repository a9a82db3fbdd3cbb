"""In chromium, the dashboard's run table: sorted by a click on a column, searched, filtered by status and by whose
runs, with each run's latest reward and its sparkline."""

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def _names(page) -> list[str]:
    return [t.strip() for t in page.locator("#runs tbody tr td:nth-child(2) a").all_inner_texts()]


def test_sort_search_and_filter_the_runs_table(web_server, runs, page):
    log_in(page, web_server)
    assert _names(page) == ["gamma", "beta", "alpha"]  # newest first
    row = page.locator("#runs tbody tr", has_text="alpha")
    assert row.locator("[data-field=reward]").inner_text() == "0.700"
    assert row.locator("svg.sparkline polyline").count() == 1

    page.click("#runs thead a:text('reward')")  # highest latest reward first; a run without one last
    page.wait_for_url("**sort=-reward**")
    assert _names(page) == ["alpha", "beta", "gamma"]
    page.click("#runs thead a:text('reward')")  # again: the other way round
    page.wait_for_url("**sort=reward**")
    assert _names(page)[:2] == ["beta", "alpha"]

    page.fill("#run-filters input[name=q]", "alp")
    page.click("#run-filters button[type=submit]")
    page.wait_for_url("**q=alp**")
    assert _names(page) == ["alpha"]
    page.click("#run-filters >> text=clear")
    page.select_option("#run-filters select[name=status]", "failed")
    page.click("#run-filters button[type=submit]")
    assert _names(page) == ["beta"]
    page.select_option("#run-filters select[name=status]", "")
    page.select_option("#run-filters select[name=scope]", "shared")
    page.click("#run-filters button[type=submit]")
    assert "No run matches these filters." in page.inner_text("#runs")
