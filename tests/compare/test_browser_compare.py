"""In chromium: tick two runs, compare their curves, their config diff and one prompt's completions side by side."""

import json
from datetime import timedelta

import pytest

from rewards.models import RewardFunction
from runs.compare.selectors import prompt_hash
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.live import publish
from runs.models import Run, StepMetric
from tests.compare.compare_data import T0, add_group, log_metrics, make_run
from tests.conftest import log_in
from tests.manual_pictures import save as save_picture

pytestmark = [pytest.mark.django_db(transaction=True)]

PROMPT = "How many r's are in strawberry?"
XSS = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


def _traces(page) -> list[dict]:
    """The chart's run curves (the faint logged lines behind smoothed ones are left out)."""
    return page.evaluate("""() => document.getElementById('compare-chart').data
        .filter((t) => t.showlegend !== false).map((t) => ({name: t.name, x: t.x, y: t.y}))""")


@pytest.fixture
def two_runs(owner, dataset_version):
    a = make_run(owner, dataset_version, "baseline", config={"learning_rate": 0.01})
    b = make_run(owner, dataset_version, "higher lr", config={"learning_rate": 0.05}, status=Run.Status.RUNNING)
    log_metrics(a, {"reward": [0.1, 0.2, 0.4], "kl": [0.0, 0.1, 0.2]})
    log_metrics(b, {"reward": [0.3, 0.6, 0.9], "kl": [0.0, 0.2, 0.4]})
    for step in (1, 2, 3):
        add_group(
            a,
            step,
            PROMPT,
            [[1.0, 0.5], [0.0, 0.5], [0.0, 0.0], [0.0, 0.0]],
            completions=[f"a{step}: 3", f"a{step}: 2", f"a{step}: wait, 2", f"a{step}: none"],
            reflections=[[], [], ["wait"], []],
        )
        add_group(
            b,
            step,
            PROMPT,
            [[1.0, 1.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]],
            completions=[f"b{step}: 3", f"b{step}: three", XSS, f"b{step}: 1"],
        )
    add_group(a, 1, "Spell 'cat' backwards.", [[0.0, 0.0]] * 4)
    add_group(b, 1, "Spell 'cat' backwards.", [[1.0, 0.0]] * 4)
    return a, b


def test_pick_two_runs_and_see_curves_the_diff_and_transcripts_side_by_side(web_server, owner, two_runs, page):
    a, b = two_runs
    log_in(page, web_server)
    page.check(f"input[name=runs][value='{a.pk}']")
    page.check(f"input[name=runs][value='{b.pk}']")
    page.click("#compare-runs")
    page.wait_for_url(f"**/runs/compare/?runs={a.pk},{b.pk}*")

    # both curves, overlaid: smoothed by default, as the URL now says
    page.wait_for_selector("#compare-chart .main-svg")
    page.wait_for_function("document.getElementById('compare-chart').data?.length === 4")
    traces = _traces(page)
    assert [t["name"] for t in traces] == ["baseline", "higher lr"]
    assert [t["x"] for t in traces] == [[1, 2, 3], [1, 2, 3]]
    w = 0.6  # s_n = (1 - w) * sum(w^(n-i) y_i) / (1 - w^n) over y = 0.3, 0.6, 0.9
    assert traces[1]["y"] == pytest.approx(
        [0.3, (1 - w) * (w * 0.3 + 0.6) / (1 - w**2), (1 - w) * (w * w * 0.3 + w * 0.6 + 0.9) / (1 - w**3)]
    )
    assert "smooth=0.6" in page.url

    # the config diff: only what differs
    rows = page.locator("#config-diff tbody tr")
    assert rows.count() == 1
    assert rows.first.inner_text().split("\t") == ["learning_rate", "0.01", "0.05"]

    # the same prompt side by side: first the prompt they disagree on most, then one picked from those they share
    page.wait_for_selector(".compare-column >> nth=1")
    assert page.inner_text("#prompt-text") == "Spell 'cat' backwards."
    page.select_option("#prompt-select", label=PROMPT)
    page.wait_for_function(f"document.getElementById('prompt-text').textContent === {json.dumps(PROMPT)}")
    page.wait_for_selector("#columns[data-step='3']")
    columns = page.locator(".compare-column")
    assert columns.count() == 2
    assert columns.nth(0).locator(".completion-row").count() == 4
    assert columns.nth(1).locator(".completion-row").count() == 4
    save_picture(page, "compare")
    assert "step 3" in columns.nth(0).locator("[data-field=shown]").inner_text()
    assert columns.nth(1).locator(".completion-row").first.locator(".nums").inner_text().startswith("adv +")
    assert page.locator(".compare-column mark.reflection").first.inner_text() == "wait"

    # model output stays text: the payload is shown, never run
    assert XSS in columns.nth(1).inner_text()
    assert page.locator("#columns img, #columns script").count() == 0
    assert page.evaluate("window.pwned") is None

    # stepping moves every column to the same step
    page.click("#step-prev")
    page.wait_for_selector("#columns[data-step='2']")
    assert [columns.nth(i).locator("[data-field=shown]").inner_text().strip() for i in range(2)] == ["step 2", "step 2"]
    assert columns.nth(0).locator(".completion").first.inner_text() == "a2: 3"
    assert "step=2" in page.url
    assert not page.is_checked("#follow")

    # where they disagree (accuracy at least 1): cat 0% vs 100% first, then strawberry 25% vs 50%
    table = page.locator("#disagreements tbody tr")
    assert table.count() == 2
    assert table.first.locator("pre").inner_text() == "Spell 'cat' backwards."
    assert table.first.locator("td.spread").inner_text() == "100%"
    assert [table.nth(1).locator("td").nth(i).inner_text() for i in (1, 2, 3)] == ["3/12 (25%)", "6/12 (50%)", "25%"]
    table.first.click()
    page.wait_for_function("document.getElementById('prompt-text').textContent === \"Spell 'cat' backwards.\"")
    page.wait_for_selector("#columns[data-step='1']")
    page.click("#random-prompt")  # two prompts shared: the other one
    page.wait_for_function(f"document.getElementById('prompt-text').textContent === {json.dumps(PROMPT)}")
    page.wait_for_selector("#columns[data-step='3']")  # a new prompt starts at its latest step

    # another metric by wall time; the URL keeps it all, so the link reopens the same view
    page.select_option("#metric", "kl")
    page.select_option("#x-axis", "time")
    page.wait_for_function("document.getElementById('compare-chart').dataset.x === 'time'")
    page.evaluate(
        "(() => { const s = document.getElementById('smooth'); s.value = '0'; "
        "s.dispatchEvent(new Event('change')); })()"
    )
    page.wait_for_function("document.getElementById('compare-chart').data.length === 2")
    assert [t["x"] for t in _traces(page)] == [[5, 15, 25], [5, 15, 25]]
    assert [t["y"] for t in _traces(page)] == [[0.0, 0.1, 0.2], [0.0, 0.2, 0.4]]
    shared = page.input_value("#share-url")
    assert "metric=kl" in shared and "x=time" in shared and "smooth=0" in shared and "prompt=" in shared

    page.click("#step-prev")
    page.wait_for_selector("#columns[data-step='2']")

    page.goto(page.input_value("#share-url"))
    page.wait_for_function("document.getElementById('compare-chart').data?.length === 2")
    assert page.input_value("#metric") == "kl" and page.input_value("#x-axis") == "time"
    page.wait_for_selector("#columns[data-step='2']")
    assert page.inner_text("#prompt-text") == PROMPT
    assert not page.is_checked("#follow")


def test_a_run_still_training_updates_the_comparison_without_a_reload(web_server, owner, two_runs, page):
    a, b = two_runs
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/compare/?runs={a.pk},{b.pk}&smooth=0&prompt={prompt_hash(PROMPT)}")
    page.wait_for_function("document.getElementById('compare-chart').data?.length === 2")
    page.wait_for_selector("#columns[data-step='3']")
    page.evaluate("window.loadMarker = 'same page'")

    StepMetric.objects.create(run=b, step=4, metrics={"reward": 1.0}, logged_at=T0 + timedelta(seconds=35))
    add_group(b, 4, PROMPT, [[1.0, 1.0]] * 4, completions=["b4: 3"] * 4)
    Run.objects.filter(pk=b.pk).update(step=4)
    publish(b.pk, status="running", step=4, steps=[4], rollouts=4)
    page.wait_for_function("document.getElementById('compare-chart').data[1].y.length === 4")
    page.wait_for_selector("#columns[data-step='4']")  # following the latest step
    assert (
        page.locator(".compare-column").nth(0).locator("[data-field=shown]").inner_text().strip()
        == "step 3 (its last before 4)"
    )
    assert page.locator(".compare-column").nth(1).locator(".completion").first.inner_text() == "b4: 3"

    Run.objects.filter(pk=b.pk).update(status=Run.Status.COMPLETED)
    publish(b.pk, status="completed", step=4, steps=[], rollouts=0)
    page.wait_for_selector(f"#compared-runs tr[data-run='{b.pk}'] .badge.completed")
    assert page.inner_text(f"#compared-runs tr[data-run='{b.pk}'] [data-field=step]") == "4 / 10"
    assert page.evaluate("window.loadMarker") == "same page"


def test_two_real_runs_compared_while_they_train(web_server, celery_worker, owner, dataset_version, page):
    """The realistic path: two tiny runs trained by the Celery worker, compared live from the dashboard."""
    rewards = [
        {
            "name": name,
            "weight": 1.0,
            "version": 1,
            "version_id": RewardFunction.objects.get(owner=owner, name=name).latest_version.pk,
        }
        for name in ("digit_ratio", "accuracy")
    ]
    config = {
        "num_generations": 4,
        "max_completion_length": 16,
        "beta": 0.0,
        "max_steps": 4,
        "per_device_train_batch_size": 8,
        "seed": 7,
        "loss_type": "dapo",
        "scale_rewards": "group",
    }
    runs = [
        run_create(
            owner=owner,
            spec=RunSpec(
                name=name,
                model="tiny",
                dataset_version=dataset_version,
                rewards=rewards,
                config={**config, "learning_rate": lr},
            ),
        )
        for name, lr in (("slow", 1e-3), ("fast", 3e-2))
    ]

    log_in(page, web_server)
    for run in runs:
        page.check(f"input[name=runs][value='{run.pk}']")
    page.click("#compare-runs")
    page.wait_for_selector("#config-diff tbody tr[data-field=learning_rate]")
    assert page.locator("#config-diff tbody tr").count() == 1
    page.evaluate("window.loadMarker = 'same page'")

    # the worker trains one run at a time; the page follows both through its one event stream
    for run in runs:
        page.wait_for_selector(f"#compared-runs tr[data-run='{run.pk}'] .badge.completed", timeout=240_000)
    for run in runs:
        run.refresh_from_db()
        assert run.status == Run.Status.COMPLETED, run.error + run.log_tail
    page.wait_for_function(
        "document.getElementById('compare-chart').data.filter((t) => t.showlegend !== false)"
        ".every((t) => t.x.length === 4)"
    )
    assert [t["name"] for t in _traces(page)] == ["slow", "fast"]
    # the same seed and dataset: the runs sample the same prompts, shown side by side with G=4 completions each
    page.wait_for_selector(".compare-column >> nth=1")
    assert page.locator(".compare-column").nth(0).locator(".completion-row").count() == 4
    assert page.locator(".compare-column").nth(1).locator(".completion-row").count() == 4
    stored = json.loads(
        page.evaluate("JSON.stringify([...document.querySelectorAll('#prompt-select option')].map((o) => o.value))")
    )
    assert len(stored) >= 1
    assert page.evaluate("window.loadMarker") == "same page"
