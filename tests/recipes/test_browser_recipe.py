"""In chromium: make a recipe from a template on the Recipes page, start it, and watch its pipeline reach completed
with the stage's link and figures; its YAML downloads."""

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
    page.wait_for_selector("#recipe-status.completed", timeout=240_000)  # the page refreshes itself while running
    stage = page.locator("#pipeline li[data-stage='1']")
    assert "completed" in stage.get_attribute("class")
    assert "reward=" in stage.inner_text()
    stage.locator("text=open").click()
    page.wait_for_selector("#run-status.completed")
    assert page.inner_text("#run-kind") == "GRPO"
    page.go_back()
    with page.expect_download() as info:
        page.click("text=Export YAML")
    assert "kind: grpo" in open(info.value.path()).read()
