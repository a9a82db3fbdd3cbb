"""In chromium: a run page's first load draws only the tab shown (no Plotly chart in a hidden tab until it is opened)
and fetches metrics.json once, even when the live stream opens after that fetch: the stream's open message says
the data fetched is current."""

import time

import pytest

from tests.browser_checks import check, watch
from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]

# every fetch of the page, and whether the stream's open message had come when it was made
RECORD = """
window.fetches = [];
const realFetch = window.fetch;
window.fetch = (url, ...rest) => {
  const entry = { url: String(url), afterOpen: Boolean(window.streamOpened), done: false };
  window.fetches.push(entry);
  const answer = realFetch(url, ...rest);
  answer.finally(() => { entry.done = true; });
  return answer;
};
const RealSource = window.EventSource;
window.EventSource = class extends RealSource {
  constructor(...args) {
    super(...args);
    this.addEventListener("open", (event) => { if (event instanceof MessageEvent) window.streamOpened = true; });
  }
};
"""


def done(page, name: str, after_open: bool = False) -> bool:
    return page.evaluate(
        "([name, afterOpen]) => window.fetches.some((f) => f.url.includes(name) && f.done && (!afterOpen || f.afterOpen))",
        [name, after_open],
    )


def plots(page, panel: str) -> int:
    return page.locator(f"#panel-{panel} .js-plotly-plot").count()


def test_hidden_tabs_draw_nothing_until_shown_and_metrics_are_fetched_once(web_server, charted_run, page):
    findings = watch(page)
    log_in(page, web_server)
    page.add_init_script(RECORD)
    metrics = []
    page.on("request", lambda request: "/metrics.json" in request.url and metrics.append(request.url))

    def slow_stream(route):
        time.sleep(0.6)  # a stream that opens after the page has fetched its data
        route.continue_()

    page.route("**/events", slow_stream)
    page.goto(f"{web_server}/runs/{charted_run.pk}/")
    page.wait_for_selector("#figure-reward:text('0.750 (step 3)')")
    # each hidden tab's data is in (the Overview shows the step time), none of it drawn
    page.wait_for_function(
        "() => ['telemetry.json', 'zero_variance.json', 'metrics.json'].every((name) =>"
        " window.fetches.some((f) => f.url.includes(name) && f.done))"
    )
    page.wait_for_selector("#figure-step-time:text('1.50 s (step 3)')")
    assert {p: plots(page, p) for p in ("metrics", "resources")} == {"metrics": 0, "resources": 0}

    # the stream opened after the first fetch; the run page's refresh after it (status.json) fetched no metrics
    page.wait_for_function("() => window.streamOpened")
    page.wait_for_function("() => window.fetches.some((f) => f.url.includes('status.json') && f.afterOpen && f.done)")
    assert len(metrics) == 1, metrics

    page.click("#tab-metrics")
    page.wait_for_selector("#chart-reward .main-svg")
    page.wait_for_selector("#chart-zero-variance .main-svg")
    assert plots(page, "resources") == 0
    page.click("#tab-resources")
    page.wait_for_selector("#chart-step-split .main-svg")
    assert len(metrics) == 1, metrics
    assert not (problems := check(page, findings)), "\n".join(problems)
