"""Labels in chromium (issue 39, item 1): a reviewer selects the text a completion is rewarded for, labels it, and
sees the label and its span on the transcript; the labels page counts each label per step and links to the rollouts
that carry it. Notes with markup show as typed."""

import pytest

from runs.models import Label, Rollout
from runs.rollouts.ingest import ingest_events
from tests.rollouts.inspect_data import make_run, rollouts_event
from tests.rollouts.test_browser_inspection import login

HACK = "42 42 42 42"
GROUPS = [
    (f"What is {g} * 2?", [(f"<think>It is {2 * g}.</think> The answer is {2 * g} 🙂 {HACK}", [1.0, 0.5])] * 2)
    for g in range(3)
]


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="reviewed")
    ingest_events(run, [rollouts_event(1, GROUPS), rollouts_event(2, GROUPS), rollouts_event(3, GROUPS)])
    return run


@pytest.mark.django_db(transaction=True)
def test_in_chromium_a_label_on_selected_text_is_kept_and_marked_on_the_transcript(web_server, run, page):
    target = Rollout.objects.get(run=run, step=2, index=3)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?ids={target.pk}")
    row = page.locator(f"article.rollout[data-id='{target.pk}']")
    row.locator(".transcript").wait_for()
    # select the spam in the answer, as a reviewer would with the mouse
    page.evaluate(
        """hack => {
            const walker = document.createTreeWalker(document.querySelector("article.rollout .transcript"), NodeFilter.SHOW_TEXT);
            let node;
            while ((node = walker.nextNode()) && !node.data.includes(hack)) {}
            const range = document.createRange();
            range.setStart(node, node.data.indexOf(hack));
            range.setEnd(node, node.data.indexOf(hack) + hack.length);
            getSelection().removeAllRanges();
            getSelection().addRange(range);
        }""",
        HACK,
    )
    row.locator("button.label-open").click()
    form = row.locator("form.label-form")
    assert "points at the selected text (11 characters)" in form.inner_text()
    form.locator("input.label-name").fill("reward hack")
    form.locator("textarea").fill("<b>pays</b> for repeating the answer")
    form.locator("button[type=submit]").click()
    badge = page.locator(f"article.rollout[data-id='{target.pk}'] .badge.label-tag")
    badge.wait_for()
    label = Label.objects.get(run=run)
    start = target.completion.index(HACK) + 1  # the emoji before it is two UTF-16 units
    assert (label.name, label.rollout_id, label.span_start, label.span_end) == (
        "reward hack",
        target.pk,
        start,
        start + 11,
    )
    assert badge.inner_text().startswith("reward hack · owner")
    marked = page.locator(f"article.rollout[data-id='{target.pk}'] mark.label-span")
    assert marked.count() == 1 and marked.inner_text() == HACK
    note = page.locator(f"article.rollout[data-id='{target.pk}'] .label-note")
    assert note.inner_text().strip() == "<b>pays</b> for repeating the answer"
    assert page.locator("article.rollout .labels b").count() == 0
    # after a reload, and through the label filter
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?label=reward+hack")
    page.locator("article.rollout mark.label-span").wait_for()
    assert page.locator("article.rollout").count() == 1
    # its author removes it
    page.locator("button.label-remove").click()
    page.locator("article.rollout .badge.label-tag").wait_for(state="detached")
    assert not Label.objects.exists() and errors == []


@pytest.mark.django_db(transaction=True)
def test_in_chromium_the_labels_page_counts_each_label_per_step(web_server, run, owner, page):
    rows = {(r.step, r.index): r for r in Rollout.objects.filter(run=run)}
    for step, index, name in [
        (1, 0, "reward hack"),
        (2, 0, "reward hack"),
        (2, 1, "reward hack"),
        (3, 2, "<i>mine</i>"),
    ]:
        r = rows[(step, index)]
        Label.objects.create(run=run, step=step, group=r.group, rollout_id=r.pk, name=name, author=owner)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/labels/")
    page.locator("#chart-labels .legendtext").first.wait_for()
    legend = [t.text_content() for t in page.locator("#chart-labels .legendtext").all()]
    assert sorted(legend) == ["<i>mine</i>", "reward hack"]  # a reviewer's text, shown as typed (stacks reversed)
    bars = page.evaluate("() => document.getElementById('chart-labels').data.map(t => [t.name, t.x, t.y])")
    assert bars == [["reward hack", [1, 2], [1, 2]], ["&lt;i&gt;mine&lt;/i&gt;", [3], [1]]]
    totals = page.locator("a.label-total")
    assert totals.all_inner_texts() == ["reward hack: 3", "<i>mine</i>: 1"]
    totals.first.click()
    page.locator("article.rollout").first.wait_for()
    assert page.locator("article.rollout").count() == 3
    assert page.locator("#latest-labels i").count() == 0 and errors == []
