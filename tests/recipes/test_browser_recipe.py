"""In chromium: make a recipe from a template on the Recipes page, start it, and watch its drawn pipeline follow the
stage to completed with its links and figures; its YAML downloads; clone with edits saves an edited copy."""

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_recipe_from_a_template_runs_from_its_page(web_server, celery_worker, owner, dataset_version, page):
    log_in(page, web_server)
    page.click("nav >> text=Recipes")
    page.fill("input[name=name]", "zero")
    page.select_option("#id_template", "R1-Zero")
    page.select_option("#id_prompts", str(dataset_version.pk))
    page.click("button:text('Make the recipe')")
    page.wait_for_selector("#recipe-status.draft")
    assert page.locator("#pipeline li").count() == 1
    assert "GRPO from the base model" in page.inner_text("#pipeline")
    page.click("#recipe-start")
    # the page follows the running stage (its pipeline fetched and redrawn), and reloads once the recipe stops
    page.wait_for_selector("#pipeline li[data-stage='1'][data-status='running']", timeout=120_000)
    page.wait_for_selector("#recipe-status.completed", timeout=240_000)
    stage = page.locator("#pipeline li[data-stage='1']")
    assert "completed" in stage.get_attribute("class")
    assert stage.locator(".box").is_visible()
    figure = stage.locator("[data-figure='reward']")
    assert "final reward" in figure.inner_text()
    float(figure.locator("dd").inner_text())
    assert stage.locator("[data-link='download']").count() == 1
    stage.locator("[data-link='run']").click()
    page.wait_for_selector("#run-status.completed")
    assert page.inner_text("#run-kind") == "GRPO"
    page.go_back()
    with page.expect_download() as info:
        page.click("text=Export YAML")
    assert "kind: grpo" in open(info.value.path()).read()

    page.click("#recipe-clone")
    editor = page.locator("#id_yaml")
    assert "max_steps: 8" in editor.input_value()
    editor.fill(editor.input_value().replace("max_steps: 8", "max_steps: 2"))
    page.fill("#id_name", "zero, shorter")
    page.click("#clone-save")
    page.wait_for_selector("#recipe-status.draft")
    assert page.inner_text("h1").startswith("zero, shorter") and "a clone of zero" in page.inner_text("#recipe")
    assert page.locator("#pipeline li").count() == 1
