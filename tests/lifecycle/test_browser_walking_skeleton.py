"""In chromium: log in, upload a dataset, create a run, and watch rollouts arrive without reloading the page."""

import json

import pytest

from tests.conftest import log_in
from tests.manual_pictures import save as save_picture

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_upload_create_a_run_and_see_rollouts_arrive_live(web_server, celery_worker, owner, page, tmp_path):
    rows = [{"prompt": f"What is {a} + {a}?", "answer": str(2 * a)} for a in range(16)]
    rows.append({"prompt": "<script>window.pwned = 1</script> What is 1 + 1?", "answer": "2"})
    upload = tmp_path / "sums.jsonl"
    upload.write_text("".join(json.dumps(r) + "\n" for r in rows))

    log_in(page, web_server)

    page.click("text=Upload dataset")
    page.fill("#id_name", "sums")
    page.set_input_files("#id_file", str(upload))
    page.click("button:text('Upload')")
    page.wait_for_selector("#preview")
    assert "17 rows" in page.inner_text("main")
    assert page.locator("#preview tbody tr").count() == 17
    assert page.locator("#preview").inner_text().count("<script>") == 1  # shown as text, not run

    page.click("text=Train on this dataset")
    page.fill("#id_name", "live run")
    page.fill("#id_max_steps", "12")
    page.fill("#id_num_generations", "4")
    page.fill("#id_per_device_train_batch_size", "8")
    for name in ("digit_ratio", "think_format", "accuracy"):
        page.locator(f"tr:has(a:text-is('{name}')) input[type=checkbox]").check()
    page.click("button:text('Start run')")
    page.wait_for_url("**/runs/*/")
    page.evaluate("window.loadMarker = 'same page'")

    # rollouts and curves arrive through the server push; the marker proves there was no reload
    page.click("#tab-rollouts")
    page.wait_for_selector(".group-card", timeout=120_000)
    page.click("#tab-metrics")
    page.wait_for_selector("#chart-reward .main-svg")
    page.wait_for_selector("#run-status.completed", timeout=120_000)
    page.click("#tab-overview")
    assert page.evaluate("window.loadMarker") == "same page"
    assert page.inner_text("#progress-text") == "step 12 / 12"
    assert page.locator("#step-select option").count() == 12
    cards = page.locator(".group-card")
    assert cards.count() == 2
    assert cards.first.locator("tbody tr").count() == 4
    assert page.evaluate("window.pwned") is None
    page.click("#tab-overview")
    save_picture(page, "run-overview")

    page.click("#tab-rollouts")
    page.select_option("#step-select", "3")
    page.wait_for_selector("#shown-step:text('Step 3')")
    assert not page.is_checked("#follow")
    save_picture(page, "run-rollouts")
