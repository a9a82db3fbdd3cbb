"""In chromium: a refused start is seen at once. The form comes back with a summary of every problem, scrolled to
and focused; a problem's link opens the folded section its field is in; an import's notes survive the refusal."""

import pytest

from runs.models import Run
from tests.conftest import log_in
from tests.lifecycle.test_run_yaml import TRL_CONFIG

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_refusal_below_the_fold_is_summarised_focused_and_linked(web_server, owner, dataset_version, page):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/new/")
    # a value only the server refuses, in a field folded away in "Every other GRPOConfig field", ~4,000 px down
    field_id = page.evaluate("""() => {
      const input = document.querySelector('#all-trl-fields input[type=number]');
      input.closest('form').noValidate = true;  // the browser's own check would stop this value first
      input.type = 'text';
      input.value = 'twelve';
      return input.id;
    }""")
    page.click("button:text('Start run')")
    page.wait_for_selector("#run-error-summary")
    assert not Run.objects.exists()
    assert page.evaluate("document.activeElement.id") == "run-error-summary"
    top = page.evaluate("document.getElementById('run-error-summary').getBoundingClientRect().top")
    assert 0 <= top < page.viewport_size["height"]  # in view, not below the fold
    assert not page.evaluate("document.getElementById('all-trl-fields').open")
    page.click(f"#run-error-summary a[href='#{field_id}']")
    assert page.evaluate("document.getElementById('all-trl-fields').open")  # the section its field is in opened
    assert page.evaluate("document.activeElement.id") == field_id


def test_an_imports_notes_survive_a_refused_start(web_server, owner, dataset_version, page):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/new/")
    page.click("summary:text('Import a TRL config')")
    page.fill("#import-form textarea", TRL_CONFIG)
    page.click("button:text('Fill the form')")
    page.wait_for_selector("#import-notes")
    notes = page.inner_text("#import-notes")
    page.fill("#id_model", "/no/such/model")  # refused by the server: not found or not yours
    page.click("button:text('Start run')")
    page.wait_for_selector("#run-error-summary")
    assert "model: not found or not yours" in page.inner_text("#run-error-summary")
    assert page.inner_text("#import-notes") == notes
    assert not Run.objects.exists()
