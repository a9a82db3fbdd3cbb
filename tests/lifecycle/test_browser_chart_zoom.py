"""In chromium: a 100,000-step run's reward curve arrives bucketed (at most 1,000 points, a min/max band around the
line, a one-step spike in the band), and zooming into 100 steps asks the server again and shows every one of them."""

import math

import pytest

from runs.models import StepMetric
from tests.browser_checks import check, watch
from tests.conftest import log_in
from tests.rollouts.inspect_data import make_run

pytestmark = [pytest.mark.django_db(transaction=True)]

STEPS = 100_000
SPIKE = 77_777


def reward(step: int) -> float:
    return 5.0 if step == SPIKE else round(0.5 + 0.4 * math.sin(step / 10), 6)


@pytest.fixture
def long_run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="long run", step=STEPS, config={"max_steps": STEPS})
    StepMetric.objects.bulk_create(
        (StepMetric(run=run, step=s, metrics={"reward": reward(s)}) for s in range(1, STEPS + 1)), batch_size=10_000
    )
    return run


def trace(page, i: int, what: str):
    return page.evaluate(f"document.getElementById('overview-reward').data[{i}].{what}")


def test_zooming_into_100_steps_shows_every_point_and_the_band(web_server, long_run, page):
    findings = watch(page)
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{long_run.pk}/")
    page.wait_for_selector("#overview-reward .main-svg")
    steps = trace(page, 0, "x")
    assert len(steps) == 1000 and steps[-1] == STEPS  # buckets, not 100,000 points
    assert trace(page, 1, "fill") == "toself"  # the band: along the maxima, back along the minima
    band = trace(page, 1, "y")
    assert len(band) == 2000 and trace(page, 1, "x") == steps + steps[::-1]
    assert max(band) == 5.0  # the one-step spike, in its bucket's max
    assert 5.0 not in trace(page, 0, "y")  # and not a bucket's last value

    page.evaluate("Plotly.relayout('overview-reward', {'xaxis.range': [50000, 50099]})")
    page.wait_for_function("document.getElementById('overview-reward').data[0].x.length === 100")
    assert trace(page, 0, "x") == list(range(50_000, 50_100))
    assert trace(page, 0, "y") == pytest.approx([reward(s) for s in range(50_000, 50_100)])
    assert trace(page, 0, "mode") == "lines+markers"
    values = trace(page, 0, "y")
    assert trace(page, 1, "y") == values + values[::-1]  # a step a bucket: min = max = value, the band is the line
    assert page.locator("#overview-reward .scatterlayer .trace").first.locator(".point").count() == 100
    assert page.evaluate("document.getElementById('overview-reward').layout.xaxis.range") == [50_000, 50_099]

    page.evaluate("Plotly.relayout('overview-reward', {'xaxis.autorange': true})")  # double-click: back to the run
    page.wait_for_function("document.getElementById('overview-reward').data[0].x.length === 1000")
    assert not (problems := check(page, findings)), "\n".join(problems)
