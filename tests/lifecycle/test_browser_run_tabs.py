"""In chromium: the run page's tabs. Overview shows the key figures; a tab is chosen by click or by the arrow keys,
kept in the address through a reload and a link, draws its charts when shown (at their size), and hidden tabs go on
receiving live steps."""

import pytest

from runs.live import publish
from runs.models import Evaluation, Run, StepMetric
from tests.conftest import log_in
from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event

pytestmark = [pytest.mark.django_db(transaction=True)]
TABS = ["overview", "metrics", "rollouts", "evaluations", "resources", "config", "log"]


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="tabbed run", status=Run.Status.RUNNING, step=3)
    for step in (1, 2, 3):
        ingest(
            run,
            rollouts_event(step, [("What is 2 + 2?", [("4", [1.0, 1.0]), ("5", [0.0, 0.5])])]),
            metrics_event(step, reward=0.25 * step, loss=0.1, entropy=1.0 - 0.1 * step),
        )
    StepMetric.objects.filter(run=run, step=3).update(
        metrics={"reward": 0.75, "loss": 0.1, "entropy": 0.7, "timing/step_s": 1.5, "timing/generation_s": 1.0}
    )
    Evaluation.objects.create(
        run=run,
        kind=Evaluation.Kind.STANDALONE,
        step=0,
        label="base model",
        model="tiny",
        dataset_version=dataset_version,
        status=Evaluation.Status.COMPLETED,
        k=4,
        metrics={"mean@k": 0.375},
    )
    run.run_dir.mkdir(parents=True, exist_ok=True)  # the Log tab's metric lines, as transformers prints them
    (run.run_dir / "train.log").write_text("{'reward': '0.25', 'loss': '0.1'}\n{'reward': '0.5', 'loss': '0.1'}\n")
    return run


def selected(page) -> list[str]:
    return [t.get_attribute("data-tab") for t in page.locator('#run-tabs [role="tab"][aria-selected="true"]').all()]


def visible_panels(page) -> list[str]:
    return [name for name in TABS if page.is_visible(f"#panel-{name}")]


def test_the_overview_shows_the_key_figures(web_server, run, page):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/")
    assert selected(page) == ["overview"] and visible_panels(page) == ["overview"]
    page.wait_for_selector("#figure-reward:text('0.750 (step 3)')")
    page.wait_for_selector("#figure-mean-at-k:text('0.375 (base model, k=4)')")
    page.wait_for_selector("#figure-step-time:text('1.50 s (step 3)')")
    assert page.is_visible("#health") and page.is_visible("#clone-link")


def test_tabs_switch_stay_in_the_address_and_size_their_charts(web_server, run, page):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/")
    # the curves wait while their tab is hidden...
    page.wait_for_selector("#figure-reward:text('0.750 (step 3)')")
    assert page.locator("#panel-metrics .js-plotly-plot").count() == 0
    page.click("#tab-metrics")
    assert selected(page) == ["metrics"] and visible_panels(page) == ["metrics"]
    assert page.url.endswith(f"/runs/{run.pk}/#metrics")
    # ...and are drawn at their box's width when it is shown (not Plotly's default of 700 px)
    page.wait_for_function("""() => {
        const divs = [...document.querySelectorAll('#charts .js-plotly-plot')];
        return divs.length === 3 && divs.every((div) =>
            Math.abs(div.clientWidth - Number(div.querySelector('.main-svg').getAttribute('width'))) < 1);
    }""")
    widths = page.evaluate("[...document.querySelectorAll('#charts .js-plotly-plot')].map((div) => div.clientWidth)")
    assert all(300 < w < 700 for w in widths), widths  # three to a row, not Plotly's 700 px
    # the zero-variance chart's legend sits above its plot, clear of the step axis' title below
    page.wait_for_function("document.getElementById('chart-zero-variance').layout")
    legend = page.evaluate("document.getElementById('chart-zero-variance').layout.legend")
    assert legend["orientation"] == "h" and legend["yanchor"] == "bottom" and legend["y"] >= 1

    page.reload()
    assert selected(page) == ["metrics"] and visible_panels(page) == ["metrics"]
    page.wait_for_selector("#chart-reward .main-svg")

    # a link to a tab, and to a group of a step (the Rollouts tab)
    page.goto(f"{web_server}/runs/{run.pk}/#evaluations")
    assert selected(page) == ["evaluations"]
    page.wait_for_selector('#evaluation-table tr[data-label="base model"]')
    page.goto(f"{web_server}/runs/{run.pk}/?step=2#group-0")
    assert selected(page) == ["rollouts"]
    page.wait_for_selector("#shown-step:text('Step 2')")
    page.select_option("#step-select", "1")
    page.wait_for_selector("#shown-step:text('Step 1')")
    assert page.url.endswith("?step=1#rollouts")

    # the Log tab's metric table heads each logged line with its step
    page.goto(f"{web_server}/runs/{run.pk}/#log")
    page.wait_for_selector("#log-metrics thead th >> nth=2")
    assert page.locator("#log-metrics thead th").all_inner_texts() == ["step", "1", "2"]


def test_the_arrow_keys_home_and_end_move_between_tabs(web_server, run, page):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/")
    page.focus("#tab-overview")
    assert page.get_attribute("#tab-overview", "tabindex") == "0"
    assert {page.get_attribute(f"#tab-{n}", "tabindex") for n in TABS[1:]} == {"-1"}  # one tab stop for the list
    for key, expected in [
        ("ArrowRight", "metrics"),
        ("ArrowRight", "rollouts"),
        ("End", "log"),
        ("ArrowRight", "overview"),
        ("ArrowLeft", "log"),
        ("Home", "overview"),
        ("ArrowLeft", "log"),
    ]:
        page.keyboard.press(key)
        assert selected(page) == [expected], key
        assert page.evaluate("document.activeElement.id") == f"tab-{expected}"
        assert visible_panels(page) == [expected]
        assert page.url.endswith(f"#{expected}")
    page.keyboard.press("Tab")  # from the tab into its panel
    assert page.evaluate("document.activeElement.id") == "panel-log"


def test_one_hover_shows_every_metric_chart_at_that_step(web_server, run, page):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/#metrics")
    for key in ("reward", "loss", "entropy"):
        page.wait_for_selector(f"#chart-{key} .main-svg")
    box = page.locator("#chart-reward .nsewdrag").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)  # the last step
    for key, value in (("reward", 0.75), ("loss", 0.1), ("entropy", 0.7)):
        label = page.locator(f"#chart-{key} .hoverlayer .legend")
        label.wait_for()
        assert label.text_content().startswith(f"3value : {value}smoothed"), key  # step 3: raw, then smoothed
    page.mouse.move(0, 0)
    page.wait_for_selector("#chart-entropy .hoverlayer .legend", state="detached")


def test_hidden_tabs_keep_receiving_live_steps(web_server, run, page):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/#log")
    page.wait_for_selector("#figure-reward:text('0.750 (step 3)')", state="attached")
    ingest(
        run,
        rollouts_event(4, [("What is 3 + 3?", [("6", [1.0, 1.0]), ("7", [0.0, 0.5])])]),
        metrics_event(4, reward=1.25, loss=0.1, entropy=0.5),
    )
    publish(run.pk, status=run.status, step=4, steps=[4], rollouts=2)
    page.wait_for_selector("#figure-reward:text('1.250 (step 4)')", state="attached", timeout=15_000)
    page.wait_for_selector("#shown-step:text('Step 4')", state="attached")
    assert selected(page) == ["log"]
    page.click("#tab-metrics")  # drawn when shown, with every step received while hidden
    page.wait_for_selector("#chart-reward .main-svg")
    assert page.evaluate("document.getElementById('chart-reward').data[0].y") == [0.25, 0.5, 0.75, 1.25]
