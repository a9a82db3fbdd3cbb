"""In chromium: the group view's token-level panel colours each completion's tokens by the value picked in its select,
shows every value on hover, lists the most clipped and least probable tokens, and keeps model text inert."""

import pytest

from tests.rollouts.inspect_data import ingest, make_run, rollouts_event
from tests.rollouts.test_browser_inspection import login
from tests.rollouts.token_data import write_step_shard

pytestmark = [pytest.mark.django_db(transaction=True)]

GROUPS = [
    ("What is 2 + 2?", [("4 is it", [1.0, 1.0]), ("5", [0.0, 1.0]), ("4.", [1.0, 0.0]), ("22", [0.0, 0.0])]),
    ("What is 3 + 3?", [("6", [1.0, 0.5])] * 4),
]


def test_tokens_are_coloured_by_the_picked_value_with_every_value_on_hover(web_server, owner, dataset_version, page):
    run = make_run(owner, dataset_version, name="token run")
    ingest(run, rollouts_event(1, GROUPS))
    write_step_shard(run, step=1, group=0)
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/?step=1#rollouts")
    page.wait_for_selector("#shown-step:text('Step 1')")
    assert page.locator("#group-1 .token-view").count() == 0  # only the sampled group has tokens
    page.click("#token-view-0 summary")
    strip = page.locator("#tokens-0 .token-strip")
    strip.locator(".tv-token").first.wait_for()
    tokens = strip.locator(".tv-token")
    assert tokens.all_text_contents() == ["4", " is", " it", "<script>window.pwned=1</script>"]
    assert page.evaluate("window.pwned") is None  # the token text stayed text

    def colours():
        return tokens.evaluate_all("els => els.map(e => getComputedStyle(e).backgroundColor)")

    # by the log-probability at the update (the first option): likely tokens greener than unlikely ones
    by_logprob = colours()
    assert len(set(by_logprob)) == 4
    # by clipped: only the clipped tokens (" is" high, the last low) are coloured
    page.select_option("#token-colour-0", "clipped")
    by_clipped = colours()
    assert [c != "rgba(0, 0, 0, 0)" for c in by_clipped] == [False, True, False, True]
    assert by_clipped != by_logprob
    # by ratio: 1.0 uncoloured, the others shaded
    page.select_option("#token-colour-0", "ratio")
    assert [c == "rgba(0, 0, 0, 0)" for c in colours()] == [True, False, False, False]
    assert tokens.nth(1).get_attribute("data-value") == "1.2999999523162842"  # float32 1.3, as stored
    # every value on hover
    title = tokens.nth(1).get_attribute("title")
    assert "log-probability at generation -2.5000" in title
    assert "reference log-probability -3.0000" in title
    assert "importance ratio 1.3000" in title
    assert "clipped: yes (high)" in title
    # the lists: most clipped (ratio farthest from 1 first), least probable
    clipped = page.locator("#tokens-0 .most-clipped li").all_inner_texts()
    assert clipped[0].startswith('"<script>window.pwned=1</script>" ratio 0.700 (low)')
    least = page.locator("#tokens-0 .least-probable li").all_inner_texts()
    assert least[0].startswith('"<script>window.pwned=1</script>" p 0.0183')
    assert page.evaluate("window.pwned") is None
