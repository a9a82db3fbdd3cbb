"""In chromium: the run page's Overview draws the reward curve, and the curve its owner pins from the Metrics tab,
kept with the run through a reload; unpinning takes it away."""

import pytest

from tests.browser_checks import check, watch
from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_the_overview_shows_the_reward_curve_and_the_pinned_one(web_server, charted_run, page):
    findings = watch(page)
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{charted_run.pk}/")
    page.wait_for_selector("#overview-reward .main-svg")
    assert page.evaluate("document.getElementById('overview-reward').data[0].y") == [0.25, 0.5, 0.75]
    assert not page.is_visible("#overview-pinned-wrap")

    page.click("#tab-metrics")
    pin = page.locator(".chart-wrap[data-metric='completions/mean_length'] .pin")
    pin.click()
    page.wait_for_selector(".chart-wrap[data-metric='completions/mean_length'] .pin[aria-pressed='true']")
    page.click("#tab-overview")
    page.wait_for_selector("#overview-pinned .main-svg")
    assert page.text_content("#overview-pinned .gtitle") == "completions/mean_length (pinned)"
    assert page.evaluate("document.getElementById('overview-pinned').data[0].y") == [11.0, 12.0, 13.0]

    page.reload()
    page.wait_for_selector("#overview-pinned .main-svg")
    assert page.text_content("#overview-pinned .gtitle") == "completions/mean_length (pinned)"
    charted_run.refresh_from_db()
    assert charted_run.pinned_metric == "completions/mean_length"
    assert not (problems := check(page, findings)), "\n".join(problems)

    page.click("#unpin")
    page.wait_for_selector("#overview-pinned-wrap", state="hidden")
    charted_run.refresh_from_db()
    assert charted_run.pinned_metric == ""
