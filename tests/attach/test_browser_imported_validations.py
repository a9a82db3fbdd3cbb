"""In chromium: a verl run imported with its validation dumps (tests/attach/conftest.py: verl's own _validate wrote
them). The run page's Evaluations tab shows one periodic evaluation a validated step, with verl's own figures (its
val-core acc/mean@n as mean@k, the mean score as reward), says they come from verl's validation dump, and shows no
sampling settings or greedy figure the dump does not hold."""

import shutil
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from runs.attach.importing import run_import
from tests.attach.conftest import VAL_ANSWERS, VAL_N
from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_the_run_page_shows_verls_validations_as_evaluations(web_server, owner, verl_dumps, verl_validation, page):
    folder, verl_metrics = verl_validation
    root = Path(settings.GRPO_IMPORT_ROOTS[0]) / f"verl-{uuid.uuid4().hex[:8]}"  # the server's import folder
    shutil.copytree(verl_dumps, root / "rollout_data")
    shutil.copytree(folder, root / "validation_data")
    try:
        run = run_import(owner=owner, path=str(root), name="verl with validations")
    finally:
        shutil.rmtree(root)
    log_in(page, web_server)
    page.goto(f"{web_server}{run.get_absolute_url()}#evaluations")
    page.wait_for_selector("#evaluation-table tbody tr[data-kind=periodic]")
    assert "verl's validation dump" in page.inner_text("#evaluations-from-verl")
    page.check("#show-periodic")  # every periodic evaluation, not only the latest
    rows = page.locator("#evaluation-table tbody tr[data-kind=periodic]")
    assert rows.count() == len(VAL_ANSWERS)
    for i, step in enumerate(sorted(VAL_ANSWERS)):
        row = rows.nth(i)
        assert row.get_attribute("data-label") == f"step {step}"
        shown = float(row.locator("[data-field='mean@k']").get_attribute("data-value"))
        assert shown == pytest.approx(verl_metrics[step][f"val-core/math_dapo/acc/mean@{VAL_N}"])
        reward = float(row.locator("[data-field='reward_mean@k']").get_attribute("data-value"))
        assert reward == pytest.approx(verl_metrics[step][f"val-aux/math_dapo/reward/mean@{VAL_N}"])
        assert row.locator("[data-field='greedy']").inner_text() == "–"
        assert row.locator("[data-field='dataset']").inner_text() == (
            f"verl's validation dump validation_data/{step}.jsonl"
        )
        assert row.locator("[data-field='generation']").inner_text() == "as verl sampled (val_kwargs)"
    # the Overview's figure is the latest validation's mean@k
    assert page.inner_text("#figure-mean-at-k").startswith(
        f"{verl_metrics[4][f'val-core/math_dapo/acc/mean@{VAL_N}']:.3f} (step 4, k={VAL_N})"
    )
    rows.nth(2).locator("a.browse").click()
    page.wait_for_selector("#evaluation-imported-from")
    assert page.inner_text("#evaluation-imported-from") == "verl's validation dump validation_data/4.jsonl"
    completions = page.locator("#eval-prompts .completion-cell")
    assert [completions.nth(i).inner_text().strip() for i in range(completions.count())] == VAL_ANSWERS[4]
