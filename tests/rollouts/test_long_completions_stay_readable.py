"""Long completions stay readable (issue 38, item 6): a group of 16 reasoning traces of 30 KB each comes to the run
page as previews (the opening and the end, the middle counted), the page stays light, and one opens in full without
loading the others, its reflection phrases marked where they are."""

import json
import random
import re

import pytest
from django.urls import reverse

from runs.rollouts.ingest import ingest_events
from tests.rollouts.inspect_data import make_run, metrics_event, rollouts_event
from tests.rollouts.test_browser_inspection import login

G = 16
WORDS = ["so", "the", "sum", "carry", "digits", "next", "total", "gives", "we", "add", "tens", "ones", "é", "数"]


def trace(rng: random.Random, k: int) -> str:
    """A 30 KB R1-style trace: thinking with a reflection early and late (an emoji among it: a character JavaScript
    counts twice), then the answer."""
    filler = " ".join(rng.choice(WORDS) for _ in range(7000))
    return (
        f"<think>First, completion {k}. Wait, 17 + 25 carries. {filler[:15000]} 🧮 {filler[15000:]} "
        f"Let me verify. 17 + 25 = 42.</think>\nThe answer is $\\boxed{{{40 + k}}}$ (trace {k})."
    )


@pytest.fixture
def long_run(owner, dataset_version):
    rng = random.Random(5)
    run = make_run(owner, dataset_version, name="long traces", config={"num_generations": G})
    texts = [trace(rng, k) for k in range(G)]
    group = ("What is 17 + 25?", [(t, [float(k % 2), 0.5]) for k, t in enumerate(texts)])
    short = ("What is 1 + 1?", [("<think>1 + 1</think> 2", [1.0, 0.5]), ("3", [0.0, 0.5])] * (G // 2))
    ingest_events(run, [rollouts_event(1, [group, short]), metrics_event(1, reward=0.5)])
    run.step = 1
    run.save(update_fields=["step"])
    return run, texts


@pytest.mark.django_db
def test_a_page_of_long_traces_sends_previews_and_one_loads_whole(owner_client, long_run):
    run, texts = long_run
    response = owner_client.get(reverse("run_step_json", args=[run.pk, 1]))
    data = response.json()
    assert len(response.content) < 120_000  # 16 x 30 KB of text stayed on the server
    long_group, short_group = data["groups"]
    for c in long_group["completions"]:
        text = texts[int(c["preview"]["tail"].rsplit("trace ", 1)[1].rstrip(").")) % G]
        preview = c["preview"]
        assert c["completion"] is None and preview["chars"] == len(text.encode("utf-16-le")) // 2
        assert text.startswith(preview["head"]) and text.endswith(preview["tail"])
        assert "The answer is" in preview["tail"] and "Let me verify." in preview["tail"]
        # the spans are the whole text's, in UTF-16 units: the tail's last one is "Let me verify." where tail_at says
        js = text.encode("utf-16-le")
        start, end = c["spans"][-1]
        assert js[2 * start : 2 * end].decode("utf-16-le") == "Let me verify"
        assert start >= preview["tail_at"]
        full = owner_client.get(reverse("run_step_completion_json", args=[run.pk, 1, c["index"]])).json()
        assert full["completion"] == text and full["spans"] == c["spans"]
    assert all(c["preview"] is None and c["completion"] for c in short_group["completions"])


@pytest.mark.django_db
def test_a_completion_of_another_step_or_run_is_not_found(owner_client, long_run, client):
    run, _ = long_run
    assert owner_client.get(reverse("run_step_completion_json", args=[run.pk, 1, 999])).status_code == 404
    assert owner_client.get(reverse("run_step_completion_json", args=[run.pk + 1, 1, 0])).status_code == 404
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_user("outsider", password="x"))
    assert client.get(reverse("run_step_completion_json", args=[run.pk, 1, 0])).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_in_chromium_the_group_of_long_traces_is_light_and_one_opens_in_full(web_server, long_run, page):
    run, texts = long_run
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/?step=1#group-0")
    page.wait_for_selector("#group-0 .long-completion")
    group = page.locator("#group-0")
    assert group.locator(".long-completion").count() == G
    nodes = page.evaluate("document.querySelectorAll('#groups *').length")
    assert nodes < 3000, nodes
    height = page.evaluate("document.getElementById('groups').getBoundingClientRect().height")
    assert height < 16 * 700, height  # a preview is a few lines, not 30 KB of text
    first = group.locator("tbody tr").first
    note = first.locator(".long-note").inner_text()
    assert re.fullmatch(r"3\d\.\dk characters: its opening and its end", note), note
    # the end of the thinking is folded, the answer shown, the late reflection marked in it
    assert first.locator("details.think summary").inner_text().startswith("the end of the thinking")
    assert "The answer is" in first.locator(".transcript").last.inner_text()
    loads = []
    page.on("request", lambda r: loads.append(r.url) if "/completions/" in r.url else None)
    first.locator("button.open-full").click()
    first.locator(".completion-cell > .transcript").wait_for()
    whole = first.locator(".completion-cell > .transcript").inner_text()
    index = int(first.get_attribute("data-index"))
    assert "🧮" in whole and len(whole) > 28_000 and f"(trace {index})" in whole
    marks = first.locator(".completion-cell > .transcript mark.reflection").all_inner_texts()
    assert marks[0] == "Wait" and marks[-1] == "Let me verify"
    assert len(loads) == 1 and loads[0].endswith(f"/steps/1/completions/{index}.json")
    assert group.locator(".long-completion").count() == G - 1  # the others stay previews
    assert json.loads(page.evaluate("JSON.stringify(window.pwned || null)")) is None


@pytest.mark.django_db
def test_the_rollout_browser_marks_where_the_searched_text_is(owner_client, long_run):
    run, texts = long_run
    url = reverse("run_rollouts_json", args=[run.pk])
    rows = owner_client.get(url, {"phrase": "LET ME VERIFY", "q": '"17 + 25 carries" -nothing'}).json()["rows"]
    assert len(rows) == G
    for r in rows:
        js = r["completion"].encode("utf-16-le")
        marked = [js[2 * a : 2 * b].decode("utf-16-le") for a, b in r["hits"]]
        assert marked == ["17 + 25 carries", "Let me verify"]  # in order, each where it is (past the emoji too)
    plain = owner_client.get(url, {"reward_min": 0}).json()["rows"]
    assert plain and all(r["hits"] == [] for r in plain)


@pytest.mark.django_db(transaction=True)
def test_in_chromium_a_search_hit_deep_in_a_long_completion_is_marked_and_scrolled_to(web_server, long_run, page):
    run, _ = long_run
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?phrase=let+me+verify&sort=step_asc")
    page.wait_for_selector("article.rollout .hit-box mark.hit")
    box = page.locator("article.rollout .hit-box").first
    hit = box.locator("mark.hit").first
    assert hit.inner_text() == "Let me verify"
    # the hit is near the end of 30 KB: the box scrolled most of the way there
    assert box.evaluate("b => b.scrollTop / (b.scrollHeight - b.clientHeight)") > 0.7
    inside = box.evaluate(
        """b => { const m = b.querySelector('mark.hit').getBoundingClientRect(), r = b.getBoundingClientRect();
                  return m.top >= r.top && m.bottom <= r.bottom; }"""
    )
    assert inside
