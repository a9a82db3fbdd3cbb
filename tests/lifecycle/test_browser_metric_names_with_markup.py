"""In chromium: a metric name holding markup (a link, bold) is drawn on the run page's charts as the text it is. Plotly
reads a few tags in the titles it draws; a name from a run must not become a link or bold text on the page."""

import pytest

from runs.models import Run
from tests.browser_checks import watch
from tests.conftest import log_in
from tests.rollouts.inspect_data import ingest, make_run, metrics_event

pytestmark = [pytest.mark.django_db(transaction=True)]

# under prefixes the Metrics tab draws (a held-out set's curves, TRL's clip ratios)
LINK = "val-core/<a href='https://example.com/phish'>click me</a>"
BOLD = "clip_ratio/<b>loud</b> & clear"


@pytest.fixture
def marked_run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="marked run", status=Run.Status.COMPLETED, step=2)
    for step in (1, 2):
        ingest(run, metrics_event(step, **{"reward": 0.5 * step, LINK: 1.0 * step, BOLD: 2.0 * step}))
    run.pinned_metric = LINK
    run.save(update_fields=["pinned_metric"])
    return run


def _chart(page, metric: str) -> dict:
    """What the chart for ``metric`` shows: its title's text, and how many links and bold pieces Plotly made in it."""
    return page.evaluate(
        """(metric) => {
            const wrap = [...document.querySelectorAll('#charts .chart-wrap')].find((w) => w.dataset.metric === metric);
            const svg = wrap.querySelector('.main-svg').parentNode;
            return {title: svg.querySelector('.gtitle').textContent, links: svg.querySelectorAll('a').length,
                    bold: [...svg.querySelectorAll('tspan')].filter((t) => /bold/.test(t.getAttribute('style') || '')
                          || t.style.fontWeight === 'bold').length};
        }""",
        metric,
    )


def test_a_metric_name_with_markup_is_drawn_as_its_text(web_server, marked_run, page):
    findings = watch(page)
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{marked_run.pk}/")
    page.wait_for_selector("#overview-pinned .main-svg")
    pinned = page.locator("#overview-pinned")
    assert pinned.locator(".gtitle").text_content() == f"{LINK} (pinned)"
    assert pinned.locator("a").count() == 0

    page.click("#tab-metrics")
    page.wait_for_function(
        "[...document.querySelectorAll('#charts .chart-wrap')].filter((w) => w.querySelector('.gtitle')).length >= 3"
    )
    assert _chart(page, LINK) == {"title": LINK, "links": 0, "bold": 0}
    assert _chart(page, BOLD) == {"title": BOLD, "links": 0, "bold": 0}
    assert page.locator("#charts a[href='https://example.com/phish']").count() == 0
    assert not findings, findings  # no console error, no failed request
