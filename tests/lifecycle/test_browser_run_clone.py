"""In chromium: clone a run with an edit, see the config diff, cancel the clone."""

import pytest

from rewards.models import RewardFunction
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Run
from tests.conftest import log_in, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_clone_with_an_edit_see_the_diff_and_cancel_it(web_server, celery_worker, owner, dataset_version, page):
    digits = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    parent = run_create(
        owner=owner,
        spec=RunSpec(
            name="base",
            model="tiny",
            dataset_version=dataset_version,
            rewards=[{"name": "digit_ratio", "weight": 1.0, "version_id": digits.latest_version.pk, "version": 1}],
            config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 2},
        ),
    )
    wait_for(lambda: parent.refresh_from_db() or parent.is_finished, timeout=120, what="the parent run")

    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{parent.pk}/")
    page.click("#clone-link")
    assert page.input_value("#id_name") == "base (clone)"
    assert page.input_value("#id_num_generations") == "4"  # everything comes from the parent
    page.fill("#id_learning_rate", "0.003")
    page.fill("#id_max_steps", "5000")
    page.click("button:text('Start the clone')")

    page.wait_for_selector("#run-status")  # the new run's own page, which links to the diff against its parent
    clone = Run.objects.exclude(pk=parent.pk).get()
    assert page.url.rstrip("/").endswith(f"/runs/{clone.pk}")
    page.click("#parent-diff")
    page.wait_for_selector("#config-diff")
    rows = {r.get_attribute("data-field"): r.inner_text() for r in page.locator("#config-diff tbody tr").all()}
    assert set(rows) == {"learning_rate", "max_steps"}  # only what differs
    assert "0.01" in rows["learning_rate"] and "0.003" in rows["learning_rate"]

    assert clone.parent == parent
    page.goto(f"{web_server}/runs/{clone.pk}/")
    wait_for(lambda: clone.refresh_from_db() or clone.step >= 1, timeout=120, what="the clone to train")
    dialogs = []
    page.once("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
    page.click("#cancel-button")
    page.wait_for_selector("#run-status.cancelled", timeout=30_000)
    assert dialogs and dialogs[0].startswith("Cancel this run?")
    assert Run.objects.get(pk=clone.pk).status == Run.Status.CANCELLED
    page.wait_for_selector("#retry-form", state="visible")
    assert not page.locator("#cancel-form").is_visible()
