"""In chromium: from the run form's code_tests row to the bench on the chosen dataset version, a passing and a
failing solution run against a row's tests in the sandbox on the Celery worker, each test's verdict shown, the
failing one's stdout too, and the reward's total; an outsider gets a 404 for the page and for a run."""

from __future__ import annotations

import io
import json

import pytest

from runs.datasets.services import dataset_import
from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]

ROWS = [
    {"prompt": "Write add(a, b).", "tests": json.dumps(["assert add(1, 2) == 3", "assert add(0, 0) == 0"])},
    {"prompt": "Write mul(a, b).", "tests": json.dumps(["assert mul(2, 3) == 6"])},
]
PASSING = "def add(a, b):\n    return a + b\n"
# the second test passes (0 - 0 == 0), the first fails; the print is untrusted text, shown as text
FAILING = "def add(a, b):\n    print('<b>adding</b>', a, b)\n    return a - b\n"


@pytest.fixture
def tasks(owner):
    data = "".join(json.dumps(r) + "\n" for r in ROWS).encode()
    return dataset_import(owner=owner, name="bench-tasks", stream=io.BytesIO(data), source_name="tasks.jsonl")


def run_solution(page, code):
    page.evaluate("(text) => GrpoEditor.setValue(null, text)", code)
    page.click("#bench-run")
    page.wait_for_selector("#bench-reward", timeout=60_000)
    return page.locator(".bench-test td.verdict").evaluate_all("(cells) => cells.map((c) => c.firstChild.textContent)")


def test_the_bench_runs_a_passing_and_a_failing_solution(
    web_server, celery_worker, owner, outsider, tasks, tiny_model, page
):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/new/")
    page.select_option("#id_dataset_version", str(tasks.pk))
    page.click("#code-tests-bench-link")
    page.wait_for_selector("[data-testid=code-editor] .cm-content")
    assert f"version={tasks.pk}" in page.url
    assert page.locator("#bench-tests li").all_inner_texts() == ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]

    assert run_solution(page, PASSING) == ["passed", "passed"]
    assert page.inner_text("#bench-reward") == "1.000"
    assert page.locator(".bench-time").count() == 2

    page.evaluate("() => document.getElementById('bench-results').replaceChildren()")
    assert run_solution(page, FAILING) == ["failed", "passed"]
    assert page.inner_text("#bench-reward") == "0.500"
    stdouts = page.locator(".bench-stdout").all_inner_texts()
    assert "<b>adding</b> 1 2" in stdouts[0] and "<b>adding</b> 0 0" in stdouts[1]
    assert page.locator("#bench-results b").count() == 0  # printed markup stays text
    assert "AssertionError" in page.inner_text(".bench-test-error")

    # another row of the same version: its own tests
    page.fill("#bench-row", "2")
    page.click("#bench-row-button")
    page.wait_for_selector("#bench-tests li")
    assert page.locator("#bench-tests li").all_inner_texts() == ["assert mul(2, 3) == 6"]

    # an outsider who has the address gets a 404
    page.context.clear_cookies()
    log_in(page, web_server, "outsider", "outsider-pass")
    assert page.goto(f"{web_server}/datasets/code-tests/?version={tasks.pk}&row=1").status == 404


def test_an_outsider_gets_404_for_the_bench_and_its_run(outsider_client, tasks):
    assert outsider_client.get(f"/datasets/code-tests/?version={tasks.pk}").status_code == 404
    response = outsider_client.post(
        "/datasets/code-tests/run/", {"dataset_version": tasks.pk, "row": 1, "solution": PASSING}
    )
    assert response.status_code == 404
    # their own bench page lists none of the owner's versions
    assert "bench-tasks" not in outsider_client.get("/datasets/code-tests/").content.decode()


def test_a_bad_run_request_is_refused_naming_the_field(owner_client, tasks):
    response = owner_client.post("/datasets/code-tests/run/", {"dataset_version": tasks.pk, "row": 0, "solution": ""})
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"row", "solution"}
    page = owner_client.get(f"/datasets/code-tests/?version={tasks.pk}&row=9")
    assert page.status_code == 200 and "row 9: this version has rows 1 to 2." in page.content.decode()


@pytest.mark.parametrize("value", ["", "x", "-1", "0", "1e309", "99999999999999999999999999", "\x00", "<b>"])
def test_garbage_in_the_bench_query_or_run_is_a_4xx_or_the_page_never_a_500(owner_client, value):
    page = owner_client.get("/datasets/code-tests/", {"version": value, "row": value})
    assert page.status_code in (200, 404)
    run = owner_client.post("/datasets/code-tests/run/", {"dataset_version": value, "row": value, "solution": value})
    assert run.status_code in (400, 404)
    assert owner_client.get(f"/datasets/code-tests/run/{value or 'x'}x/").status_code in (200, 404)
