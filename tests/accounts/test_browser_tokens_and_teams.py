"""In chromium: make a token on the Tokens page and use it from a script; make a team, add a colleague, share a
dataset with it from the dataset page, and the colleague finds it on their dashboard."""

import json
import urllib.request

import pytest

from runs.models import ApiToken
from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_token_made_in_the_browser_works_from_a_script_until_revoked(web_server, owner, page):
    log_in(page, web_server)
    page.click("nav >> text=Tokens")
    page.fill("#token-name", "notebook")
    page.select_option("#token-scope", "read")
    page.click("#token-create")
    raw = page.inner_text("#new-token-value").strip()
    assert raw.startswith("gwp_")

    def me():
        req = urllib.request.Request(f"{web_server}/api/me", headers={"Authorization": f"Bearer {raw}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, None

    assert me() == (200, {"username": "owner", "teams": [], "scope": "read"})
    page.goto(f"{web_server}/settings/tokens/")
    assert raw not in page.content()  # shown once
    row = page.locator(f"#token-table tr[data-token='{ApiToken.objects.get().pk}']")
    assert "notebook" in row.inner_text() and "read" in row.inner_text()
    row.locator("text=Revoke").click()
    page.wait_for_selector("text=it no longer works")
    assert me()[0] == 401


def test_share_a_dataset_with_a_team_and_a_colleague_sees_it(
    web_server, owner, dataset_version, django_user_model, browser
):
    django_user_model.objects.create_user(username="colleague", password="colleague-pass")
    context = browser.new_context()
    page = context.new_page()
    log_in(page, web_server)
    page.click("nav >> text=Teams")
    page.fill("#team-name", "lab")
    page.click("#team-create")
    page.fill("input[name=username]", "colleague")
    page.click("button:text('Add')")
    page.wait_for_selector(".team >> text=colleague")

    page.goto(f"{web_server}/datasets/{dataset_version.dataset.pk}/")
    page.click("#share-box summary")
    page.select_option("#share-access", "read")
    page.click("#share-button")
    page.wait_for_selector("text=Shared with lab (read)")
    assert "lab (read)" in page.inner_text("#share-box summary")
    context.close()

    context = browser.new_context()
    colleague = context.new_page()
    log_in(colleague, web_server, "colleague", "colleague-pass")
    item = colleague.locator("#datasets li", has_text="arithmetic")
    assert "owner" in item.inner_text()  # the badge says whose it is
    item.locator("a").click()
    colleague.wait_for_selector("text=shared with you by owner")
    assert colleague.locator("#share-form").count() == 0  # only the owner shares
    context.close()
