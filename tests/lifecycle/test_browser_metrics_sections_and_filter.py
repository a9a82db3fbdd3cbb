"""In chromium: the Metrics tab groups its charts in a section per TRL prefix, and the filter box hides the charts
whose name does not hold its text (and the sections left empty)."""

import pytest

from tests.browser_checks import check, watch
from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def shown(page, selector: str, attribute: str) -> list[str]:
    return [e.get_attribute(attribute) for e in page.locator(selector).all() if e.is_visible()]


def test_the_metrics_tab_has_a_section_per_prefix_and_a_filter(web_server, charted_run, page):
    findings = watch(page)
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{charted_run.pk}/#metrics")
    page.wait_for_selector("#chart-clip-ratio-region-mean .main-svg")
    assert page.locator("#charts details.metric-section > summary").all_text_contents() == [
        "train · 3 charts",
        "rewards · 2 charts",
        "completions · 1 chart",
        "other · 1 chart",
    ]
    assert shown(page, "details[data-section='rewards'] .chart-wrap", "data-metric") == [
        "rewards/accuracy/mean",
        "rewards/digit_ratio/mean",
    ]

    page.fill("#metric-filter", "ACCURACY")
    assert shown(page, "#charts .chart-wrap", "data-metric") == ["rewards/accuracy/mean"]
    assert shown(page, "#charts details.metric-section", "data-section") == ["rewards"]
    assert page.text_content("#metric-count") == "1 of 7 charts"
    page.fill("#metric-filter", "<img src=x onerror=alert(1)>")  # matches nothing, runs nothing
    assert shown(page, "#charts .chart-wrap", "data-metric") == []
    page.fill("#metric-filter", "")
    assert len(shown(page, "#charts .chart-wrap", "data-metric")) == 7 and page.text_content("#metric-count") == ""
    assert not (problems := check(page, findings)), "\n".join(problems)
