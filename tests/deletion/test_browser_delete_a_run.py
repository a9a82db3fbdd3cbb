"""In chromium: the owner deletes a finished run from its page, after a confirmation that lists its rollouts and
folder; a running run's confirmation says to cancel it first and offers no delete. Every delete page (run, model,
reward function, dataset) passes the page check (axe, console, failed requests)."""

import pytest

from rewards.models import RewardFunction
from runs.models import Rollout, Run
from tests.browser_checks import check, watch
from tests.conftest import log_in
from tests.rollouts.inspect_data import make_run

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_the_owner_confirms_and_the_run_goes_with_its_folder(web_server, owner, dataset_version, finished_run, page):
    busy = make_run(owner, dataset_version, name="busy", status=Run.Status.RUNNING)
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{finished_run.pk}/")
    href = page.get_attribute("#delete-link", "href")
    assert href == f"/runs/{finished_run.pk}/delete/"
    # the confirmation in a tab of its own: the run page's live requests, cut short by leaving it, are not its own
    page = page.context.new_page()
    findings = watch(page)

    page.goto(f"{web_server}/runs/{busy.pk}/delete/")
    assert "the run 'busy' is running: cancel it first" in page.inner_text("#delete-refusals")
    assert page.locator("#delete-form").count() == 0
    assert not (problems := check(page, findings)), "\n".join(problems)

    # the same confirmation for a model and a reward function, and a dataset's refusal
    reward = RewardFunction.objects.filter(owner=owner).first()
    for url, shown in (
        (f"/models/{finished_run.pk}/final/delete/", "#delete-form"),
        (f"/rewards/{reward.pk}/delete/", "#delete-form"),
        (f"/datasets/{dataset_version.dataset.pk}/delete/", "#delete-refusals"),
    ):
        page.goto(web_server + url)
        page.wait_for_selector(shown)
        assert not (problems := check(page, findings)), "\n".join(problems)

    page.goto(web_server + href)
    page.wait_for_selector("#delete-confirmation")
    assert page.locator("#delete-rows li").all_inner_texts()[:2] == ["the run 'old run'", "2 rollouts"]
    assert page.inner_text("#delete-paths") == str(finished_run.run_dir)
    assert not (problems := check(page, findings)), "\n".join(problems)

    page.click("#delete-confirmed")
    page.wait_for_selector("text=Deleted the run 'old run'.")
    assert not (problems := check(page, findings)), "\n".join(problems)
    assert not Run.objects.filter(pk=finished_run.pk).exists() and not Rollout.objects.filter(run_id=finished_run.pk)
    assert not finished_run.run_dir.exists()
