"""In chromium: start an SFT run from the form on prompt-completion rows and watch its SFT curves arrive; the page
names the trainer and shows no rollout browser; the metrics JSON holds loss, mean token accuracy and learning rate."""

import json

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_an_sft_run_from_the_form_draws_its_curves(web_server, celery_worker, owner, page, tmp_path):
    from workers.training.coldstart import cold_start_rows

    upload = tmp_path / "worked.jsonl"
    upload.write_text("".join(json.dumps(r) + "\n" for r in cold_start_rows(32)))
    log_in(page, web_server)
    page.click("text=Upload dataset")
    page.fill("#id_name", "worked answers")
    page.set_input_files("#id_file", str(upload))
    page.click("button:text('Upload')")
    page.wait_for_selector("#preview")

    page.goto(f"{web_server}/runs/new/")
    page.click("#kind-switch a")
    assert page.inner_text("h1") == "New SFT run"
    assert page.locator("#id_num_generations").count() == 0
    page.fill("#id_name", "cold start")
    page.fill("#id_max_steps", "6")
    page.fill("#id_per_device_train_batch_size", "8")
    page.click("button:text('Start run')")
    page.wait_for_url("**/runs/*/")

    page.wait_for_selector("#run-status.completed", timeout=180_000)
    page.click("#tab-metrics")  # the curves are on the Metrics tab
    page.wait_for_selector("#chart-loss .main-svg")
    page.wait_for_selector("#chart-mean-token-accuracy .main-svg")
    page.wait_for_selector("#chart-learning-rate .main-svg")
    assert page.inner_text("#run-kind") == "SFT"
    assert page.inner_text("#progress-text") == "step 6 / 6"
    assert not page.is_visible("#rollouts")
    metrics = page.evaluate("fetch(location.pathname + 'metrics.json').then(r => r.json())")
    assert {"loss", "mean_token_accuracy", "learning_rate"} <= set(metrics["charts"])
    assert metrics["steps"]["last"] == 6
    loss = page.evaluate("fetch(location.pathname + 'series.json?metric=loss').then(r => r.json())")
    assert len(loss["step"]) >= 6 and loss["step"][-1] == 6 and loss["exact"]
