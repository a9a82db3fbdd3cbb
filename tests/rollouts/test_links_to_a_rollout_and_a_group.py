"""Links (issue 39, item 3): every rollout and group has a stable address that opens it in context (the run page at
its step, its group in view, the completion marked), one click copies it, and it answers 404 to whoever may not read
the run; a teammate of a shared run opens it."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from runs.models import Rollout, RunShare
from runs.rollouts.ingest import ingest_events
from tests.conftest import logged_in
from tests.rollouts.inspect_data import make_run, rollouts_event
from tests.rollouts.test_browser_inspection import login

GROUPS = [(f"What is {g} + {g}?", [(f"answer {g}.{k}", [float(k == 1), 0.5]) for k in range(4)]) for g in range(40)]


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="linked")
    ingest_events(run, [rollouts_event(1, GROUPS[:2]), rollouts_event(2, GROUPS)])
    return run


@pytest.fixture
def shared(run, owner, member):
    team = Group.objects.create(name="lab")
    team.user_set.add(owner, member)
    RunShare.objects.create(run=run, team=team)
    return run


@pytest.mark.django_db
def test_a_rollout_s_link_opens_the_run_page_at_its_group_with_it_marked(owner_client, run):
    rollout = Rollout.objects.get(run=run, step=2, group=37, index=37 * 4 + 2)
    response = owner_client.get(reverse("rollout_link", args=[run.pk, rollout.pk]))
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{run.pk}/?step=2&completion={37 * 4 + 2}#group-37"
    group = owner_client.get(reverse("group_link", args=[run.pk, 2, 37]))
    assert group.status_code == 302 and group["Location"] == f"/runs/{run.pk}/?step=2#group-37"


@pytest.mark.django_db
def test_a_link_answers_404_to_an_outsider_and_opens_for_a_teammate(shared, member, outsider, owner, dataset_version):
    rollout = Rollout.objects.filter(run=shared).first()
    link, group = reverse("rollout_link", args=[shared.pk, rollout.pk]), reverse("group_link", args=[shared.pk, 1, 0])
    assert logged_in(member).get(link).status_code == 302 and logged_in(member).get(group).status_code == 302
    assert logged_in(outsider).get(link).status_code == 404 and logged_in(outsider).get(group).status_code == 404
    other = make_run(owner, dataset_version, name="other")  # a rollout's id under another run's address
    assert logged_in(owner).get(reverse("rollout_link", args=[other.pk, rollout.pk])).status_code == 404
    assert logged_in(owner).get(reverse("group_link", args=[shared.pk, 1, 99])).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_in_chromium_a_copied_link_opens_the_completion_in_its_group(web_server, run, page):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=web_server)
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?sort=step_asc&step_min=2&reward_min=1")
    row = page.locator("article.rollout").nth(5)
    row.locator("a.permalink").click()
    row.locator("a.permalink:text('link copied')").wait_for()  # copied, not followed: the page stays
    copied = page.evaluate("navigator.clipboard.readText()")
    rollout = Rollout.objects.get(pk=int(row.get_attribute("data-id")))
    assert copied == f"{web_server}/runs/{run.pk}/rollouts/{rollout.pk}/"
    page.goto(copied)
    page.wait_for_selector("tr.linked")
    assert page.url.endswith(f"?step=2&completion={rollout.index}#group-{rollout.group}")
    linked = page.locator("tr.linked")
    assert linked.count() == 1 and linked.get_attribute("data-index") == str(rollout.index)
    assert page.locator(f"#group-{rollout.group} tr.linked").count() == 1
    assert linked.evaluate(
        "r => { const b = r.getBoundingClientRect(); return b.top >= 0 && b.bottom <= innerHeight; }"
    )
