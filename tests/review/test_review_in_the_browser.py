"""A review in chromium, by keyboard alone (issue 39, item 2): 20 rollouts, labels put on and taken off by number,
j and k to move, ? for help; the progress is saved and the finished review shows its tallies with links."""

import pytest

from runs.models import Label, ReviewItem
from runs.review.services import review_create
from runs.rollouts.ingest import ingest_events
from tests.manual_pictures import save as save_picture
from tests.rollouts.inspect_data import make_run, rollouts_event
from tests.rollouts.test_browser_inspection import login

GROUPS = [
    (f"What is {g} + {g}?", [(f"<think>{g}+{g}</think> answer {g}.{k}", [float(k == 1), 0.5]) for k in range(4)])
    for g in range(5)
]


@pytest.fixture
def review(owner, dataset_version):
    run = make_run(owner, dataset_version, name="by keyboard")
    ingest_events(run, [rollouts_event(step, GROUPS) for step in range(1, 6)])
    return review_create(run=run, user=owner, data={}, query="", mode="sample", size=20, name="twenty")


@pytest.mark.django_db(transaction=True)
def test_in_chromium_a_review_of_20_rollouts_is_done_by_keyboard_alone(web_server, review, page):
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    login(page, web_server)
    page.goto(f"{web_server}{review.get_absolute_url()}")
    article = page.locator("#item article.rollout")
    article.wait_for()
    assert page.locator("#item .review-group tr").count() == 5  # its group of 4 around it, and the header
    assert page.locator("#item .review-group tr.current").count() == 1
    page.keyboard.press("?")
    assert page.locator("#help").is_visible()
    page.keyboard.press("Escape")
    assert page.locator("#help").is_hidden()
    hacked = []
    for position in range(20):
        page.wait_for_function(f"document.querySelector('#item article.rollout')?.dataset.position === '{position}'")
        if position % 4 == 0:
            page.keyboard.press("1")  # reward hack
            page.locator("#item .badge.label-tag").wait_for()
            hacked.append(int(article.get_attribute("data-id")))
            if position == 0:
                save_picture(page, "review")
        if position == 6:  # put on by mistake, taken off again
            page.keyboard.press("2")
            page.locator("#item .badge.label-tag").wait_for()
            page.keyboard.press("2")
            page.locator("#item .badge.label-tag").wait_for(state="detached")
        if position == 10:  # back to the one before, then on again
            page.keyboard.press("k")
            page.wait_for_function("document.querySelector('#item article.rollout')?.dataset.position === '9'")
            page.keyboard.press("j")
            page.wait_for_function("document.querySelector('#item article.rollout')?.dataset.position === '10'")
        page.keyboard.press("j")
    page.locator("#queue-empty").wait_for()
    assert page.locator("#progress").inner_text().startswith("20 of 20 done")
    assert ReviewItem.objects.filter(review=review, done_at__isnull=False).count() == 20
    labels = Label.objects.filter(run=review.run)
    assert sorted(labels.values_list("rollout_id", flat=True)) == sorted(hacked)
    assert set(labels.values_list("name", "review_id")) == {("reward hack", review.pk)}
    tally = page.locator("#tallies a")
    assert tally.inner_text() == "reward hack" and "5 rollouts" in page.locator("#tallies").inner_text()
    tally.click()
    page.locator("article.rollout").first.wait_for()
    assert sorted(
        int(x) for x in page.locator("article.rollout").evaluate_all("a => a.map(x => x.dataset.id)")
    ) == sorted(hacked)
    assert errors == []
