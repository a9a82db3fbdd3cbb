"""In chromium: the rollout browser, the group view, the self-reflection tracker's chart, live updates without a
reload, and transcripts that render <think>, LaTeX and code while model text full of markup stays inert text."""

import json
import re

import pytest

from runs.live import publish
from runs.rollouts.ingest import ingest_events
from tests.rollouts.inspect_data import make_run, metrics_event, rollouts_event

pytestmark = [pytest.mark.django_db(transaction=True)]

RICH = (
    "<think>Let me compute 2 + 2. Wait, let me check: $2 + 2 = 4$.\n```python\ndef add(a, b):\n    return a + b\n```\n"
    "</think>\nThe answer is $$\\boxed{4}$$"
)
PAYLOADS = [
    "<script>window.pwned = 1</script>",
    '</textarea><img src=x onerror="window.pwned = 2">',
    "<think><img src=x onerror=window.pwned=3>thinking</think> done",
    "$\\href{javascript:window.pwned=4}{click}$ and \\(\\htmlId{x}{y}\\)",
    "```html\n</code></pre><script>window.pwned = 5</script>\n```",
    '<svg onload="window.pwned = 6"></svg> &lt;b&gt;escaped&lt;/b&gt;',
]


def login(page, web_server):
    page.goto(f"{web_server}/login/")
    page.fill("#id_username", "owner")
    page.fill("#id_password", "owner-pass")
    page.click("button[type=submit]")
    page.wait_for_selector("text=Datasets")


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="inspected run")
    for step in (1, 2, 3):
        groups = [
            (
                "What is 2 + 2?",
                [(RICH, [1.0, 1.0]), ("5", [0.0, 0.5]), (f"Actually, 4 (step {step})", [1.0, 0.0]), ("22", [0.0, 0.0])],
            ),
            ("What is 3 + 3?", [("6", [1.0, 0.5])] * 4),  # zero variance
        ]
        ingest_events(
            run,
            [
                rollouts_event(step, groups),
                metrics_event(step, reward=0.3 * step, frac_reward_zero_std=0.5, entropy=1.0, loss=0.0),
            ],
        )
    run.step = 3
    run.save(update_fields=["step"])
    return run


def test_the_rollout_browser_filters_sorts_and_renders_transcripts(web_server, run, page):
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?reward_min=1.6&sort=adv_desc")
    page.wait_for_selector("article.rollout")
    cards = page.locator("article.rollout")
    assert cards.count() == 3  # RICH at steps 1-3 (reward 2); the zero-variance 6s have 1.5
    first = cards.first
    assert "reward 2.000" in first.inner_text()
    # <think> is a collapsible section, LaTeX rendered by KaTeX, code highlighted, reflection phrases marked
    think = first.locator("details.think")
    assert think.get_attribute("open") is not None
    assert "thinking ·" in think.locator("summary").inner_text()
    assert first.locator(".math .katex").count() >= 1
    assert first.locator(".math.display .katex-display").count() == 1
    assert first.locator("pre.code-block .tok-keyword").first.inner_text() == "def"
    assert [m.inner_text() for m in first.locator("mark.reflection").all()] == ["Wait", "let me check"]
    think.locator("summary").click()
    assert think.get_attribute("open") is None
    assert not think.locator("pre.code-block").is_visible()

    # a filter from the form lands in the address, which reproduces the view
    page.select_option("#id_zero_std", "yes")
    page.fill("#id_reward_min", "")
    page.click("#filters button[type=submit]")
    page.wait_for_url(re.compile(r".*zero_std=yes.*"))
    page.wait_for_selector("#rows-count")
    assert page.locator("article.rollout").count() == 12
    assert page.locator("article.rollout .badge.warn").count() == 12
    shared = page.url
    page.goto(shared)
    page.wait_for_selector("#rows-count")
    assert page.locator("article.rollout").count() == 12

    # a completion links to its group in the group view
    page.locator("article.rollout a.where").first.click()
    page.wait_for_selector(".group-card")
    assert re.search(r"/runs/\d+/\?step=\d#group-1$", page.url)


def test_the_browser_pages_through_more_than_one_page(web_server, owner, dataset_version, page):
    run = make_run(owner, dataset_version, name="long run")
    for step in range(1, 9):
        groups = [
            (f"Prompt {g}", [(f"answer {step}.{g}.{k}", [float(k % 2), 0.1 * k]) for k in range(4)]) for g in range(2)
        ]
        ingest_events(run, [rollouts_event(step, groups)])
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?sort=step_asc")
    page.wait_for_selector("#rows-count")
    assert page.locator("article.rollout").count() == 50
    assert page.locator("article.rollout").first.get_attribute("data-id") is not None
    page.click("#next-page")
    page.wait_for_url(re.compile(r".*after=.*"))
    page.wait_for_selector("#rows-count")
    assert page.locator("article.rollout").count() == 14
    assert page.is_hidden("#next-page")
    assert page.locator("article.rollout").last.locator(".where").inner_text() == "step 8 · group 1 · #7"


def test_the_group_view_ranks_by_advantage_shows_the_formula_and_flags_zero_variance(web_server, run, page):
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/?step=2#group-1")
    page.wait_for_selector("#shown-step:text('Step 2')")
    assert not page.is_checked("#follow")
    assert page.locator("#shown-step").inner_text() == "Step 2: 2 groups, 1 with zero variance"
    first = page.locator("#group-0")
    advantages = [float(a) for a in first.locator("td.adv").all_inner_texts()]
    assert advantages == sorted(advantages, reverse=True) and advantages[0] > 0
    # totals 2, 0.5, 1, 0: mean 0.875
    assert first.locator(".formula").inner_text().startswith("advantage = (reward − 0.875) / (")
    zero = page.locator("#group-1")
    badge = zero.locator("a.badge.warn")
    assert badge.inner_text() == "zero variance: no learning signal"
    # the step is in the address: picking another one updates it
    page.select_option("#step-select", "3")
    page.wait_for_selector("#shown-step:text('Step 3')")
    assert page.url.endswith("?step=3#rollouts")  # the tab stays in the address too
    badge = page.locator("#group-1 a.badge.warn")
    badge.click()
    page.wait_for_selector("#rows-count")
    assert "zero_std=yes" in page.url and "step_min=3" in page.url
    assert page.locator("article.rollout").count() == 4
    # the run page's health card explains the near-zero loss and links the zero-variance share
    page.goto(f"{web_server}/runs/{run.pk}/")
    page.wait_for_selector("#health li[data-key=near_zero_loss]")
    assert page.locator("#zero-std-link").get_attribute("href") == f"/runs/{run.pk}/rollouts/?zero_std=yes"


def test_the_tracker_chart_draws_the_share_per_step_and_follows_an_edit(web_server, run, page):
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/reflection/")
    page.wait_for_selector("#chart-share .main-svg")
    series = page.evaluate("document.getElementById('chart-share').data[0]")
    assert series["x"] == [1, 2, 3]
    assert series["y"] == [0.25, 0.25, 0.25]  # RICH has "wait" and "let me check"; "Actually" is the other one
    assert series["y"] == pytest.approx([0.25] * 3)
    assert page.inner_text("#stat-first") == "step 1"
    page.fill("#phrases", "actually\n/compute/")
    page.click("#phrases-form button[type=submit]")
    page.wait_for_selector(".flash")
    page.wait_for_selector("#chart-share .main-svg")
    page.wait_for_function(
        "document.getElementById('chart-share').data[0].y[0] === 0.25 && "
        "document.getElementById('stat-first-phrases').textContent.includes('/compute/: 1')"
    )
    assert page.locator("#browse-reflective").get_attribute("href").endswith("?reflective=yes")


def test_open_pages_receive_new_steps_without_a_reload(web_server, run, page):
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?sort=step_desc")
    page.wait_for_selector("#rows-count")
    tracker = page.context.new_page()
    tracker.goto(f"{web_server}/runs/{run.pk}/reflection/")
    tracker.wait_for_selector("#chart-share .main-svg")
    for p in (page, tracker):
        p.evaluate("window.loadMarker = 'same page'")
    ingest_events(run, [rollouts_event(4, [("What is 9 + 9?", [("Wait, 18", [1.0, 1.0]), ("17", [0.0, 0.0])])])])
    publish(run.pk, status=run.status, step=4, steps=[4], rollouts=2)
    page.wait_for_selector("article.rollout .where:text('step 4 · group 0 · #0')", timeout=15_000)
    tracker.wait_for_function("document.getElementById('chart-share').data[0].x.includes(4)", timeout=15_000)
    assert tracker.evaluate("document.getElementById('chart-share').data[0].y[3]") == 0.5
    for p in (page, tracker):
        assert p.evaluate("window.loadMarker") == "same page"


def test_markup_in_model_text_is_shown_as_text_and_runs_nothing(web_server, owner, dataset_version, page):
    run = make_run(
        owner,
        dataset_version,
        name="hostile run",
        reflection_phrases=["wait", "</textarea><script>window.pwned = 7</script>"],
    )
    prompt = "<script>window.pwned = 8</script> What is 1 + 1?"
    groups = [
        (prompt, [(text, [1.0, float(i % 2)]) for i, text in enumerate(PAYLOADS[:4])]),
        (prompt, [(text, [0.0, float(i % 2)]) for i, text in enumerate(PAYLOADS[2:6])]),
    ]
    ingest_events(run, [rollouts_event(1, groups)])
    login(page, web_server)
    key = run.rollouts.first().prompt_key
    for path in (
        f"/runs/{run.pk}/?step=1",
        f"/runs/{run.pk}/rollouts/",
        f"/runs/{run.pk}/reflection/",
        f"/runs/{run.pk}/prompts/{key}/",
    ):
        page.goto(web_server + path)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.pwned") is None, path
        assert (
            page.locator(
                ".transcript img, .transcript svg:not(.katex svg), .transcript script, main img, main script"
            ).count()
            == 0
        ), path
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/")
    page.wait_for_selector("#rows-count")
    text = page.inner_text("#rows")
    for payload in (
        "<script>window.pwned = 1</script>",
        '</textarea><img src=x onerror="window.pwned = 2">',
        '<svg onload="window.pwned = 6"></svg> &lt;b&gt;escaped&lt;/b&gt;',
    ):
        assert payload in text
    # KaTeX refuses \href and \htmlId (trust: false): no link comes out of the formula
    assert page.locator(".transcript a").count() == 0
    # the phrase list goes back into its textarea as text
    page.goto(f"{web_server}/runs/{run.pk}/reflection/")
    assert page.input_value("#phrases") == "wait\n</textarea><script>window.pwned = 7</script>"
    assert page.evaluate("window.pwned") is None
    page.goto(f"{web_server}/runs/{run.pk}/prompts/{key}/")
    page.wait_for_function("document.getElementById('prompt-text').textContent.length > 0")
    assert page.inner_text("#prompt-text") == prompt
    assert json.dumps(page.evaluate("window.pwned")) == "null"
    # its solve-rate axis: 0 to 100% in quarters, with no grid of its own across the reward axis' grid, and the
    # legend above the plot, off that axis' labels
    page.wait_for_function("document.getElementById('chart-prompt').layout")
    layout = page.evaluate("document.getElementById('chart-prompt').layout")
    assert layout["legend"]["yanchor"] == "bottom" and layout["legend"]["y"] >= 1
    axis = layout["yaxis2"]
    assert (axis["range"], axis["tick0"], axis["dtick"], axis["tickformat"], axis["showgrid"]) == (
        [0, 1],
        0,
        0.25,
        ".0%",
        False,
    )


def test_a_large_step_opens_at_the_linked_group_and_pages_through_its_groups(web_server, owner, dataset_version, page):
    run = make_run(owner, dataset_version, name="wide run")
    groups = [(f"Prompt {g}", [(f"answer {g}.{k}", [float(k % 2), 0.1 * k]) for k in range(4)]) for g in range(40)]
    ingest_events(run, [rollouts_event(1, groups)])
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/?step=1#group-35")
    page.wait_for_selector("#group-35")
    assert page.inner_text("#shown-step") == "Step 1: 40 groups"
    assert page.inner_text("#group-range") == "groups 32–39 shown"
    assert page.locator(".group-card").count() == 8
    page.click("#groups-before")
    page.wait_for_selector("#group-0")
    assert page.locator(".group-card").count() == 32 and page.is_visible("#groups-after")


def test_a_code_tests_rollout_shows_which_tests_passed_and_each_failure(web_server, owner, dataset_version, page):
    run = make_run(owner, dataset_version, name="code run")
    event = rollouts_event(
        1,
        [("Write add(a, b).", [("```python\ndef add(a, b): return a - b\n```", [0.5, 0.0]), ("no code", [0.0, 0.0])])],
    )
    event["rows"][0]["columns"] = {
        "code_tests": [
            {"test": "assert add(1, 2) == 3", "passed": False, "error": "AssertionError: <b>not bold</b>"},
            {"test": "assert add(0, 0) == 0", "passed": True, "error": ""},
        ]
    }
    ingest_events(run, [event])
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/")
    page.wait_for_selector("details.code-tests-details")
    tests = page.locator("details.code-tests-details")
    assert tests.count() == 1 and tests.evaluate("d => d.open")  # a failure: open at once
    assert "tests: 1/2 passed" in tests.inner_text()
    assert page.locator("li.test-fail").inner_text().endswith("AssertionError: <b>not bold</b>")  # text, not markup
    assert page.locator("li.test-pass code").inner_text().strip() == "assert add(0, 0) == 0"
