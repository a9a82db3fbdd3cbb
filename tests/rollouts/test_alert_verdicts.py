"""Detectors give evidence and take verdicts (issue 39, item 5), on the demo run's real event log (TRL on the tiny
model, its digit hack): an alert links to the rollouts behind it; confirming or dismissing it labels them; a dismissed
alert is not raised again for the same evidence, and is raised again when the evidence changes."""

import gzip
import json

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from runs.models import AlertVerdict, Label, RunShare
from tests.api.conftest import api_client
from tests.conftest import logged_in
from tests.rollouts.inspect_data import ingest
from tests.rollouts.test_browser_inspection import login
from tests.rollouts.test_detectors import detectors, linked
from tests.rollouts.test_hack_detectors import DEMO_EVENTS, demo_run

pytestmark = pytest.mark.django_db


def verdict(client, run, signal, verdict, **extra):
    body = {"key": signal["key"], "evidence": signal["evidence"], "verdict": verdict, **extra}
    return client.post(f"/api/runs/{run.pk}/alerts/verdicts", json.dumps(body), content_type="application/json")


@pytest.fixture
def run(owner, dataset_version):
    return demo_run(owner, dataset_version)


def test_confirming_an_alert_labels_the_rollouts_behind_it(run, owner, owner_client):
    blind = detectors(owner_client, run)["prompt_blind_answers"]
    behind = {r.pk for r in linked(run, blind["url"])}
    response = verdict(api_client(owner), run, blind, "confirm", note="every prompt answered 4")
    assert response.status_code == 201 and response.json()["labeled"] == len(behind)
    labels = Label.objects.filter(run=run)
    assert set(labels.values_list("rollout_id", flat=True)) == behind
    assert set(labels.values_list("name", flat=True)) == {"confirmed: prompt blind answers"}
    assert labels.first().note.startswith(blind["title"]) and labels.first().note.endswith("every prompt answered 4")
    again = detectors(owner_client, run)["prompt_blind_answers"]
    assert again["level"] == "warn" and again["verdict"]["verdict"] == "confirmed"
    assert again["verdict"]["by"] == "owner" and again["verdict"]["labeled"] == len(behind)
    rows = owner_client.get(reverse("run_rollouts_json", args=[run.pk]), {"label": "confirmed: prompt blind answers"})
    assert {r["id"] for r in rows.json()["rows"]} == behind or len(behind) > 50


def test_a_dismissed_alert_stays_quiet_for_its_evidence_and_returns_with_new_evidence(run, owner, owner_client):
    collapse = detectors(owner_client, run)["length_collapse"]
    assert verdict(api_client(owner), run, collapse, "dismiss").status_code == 201
    assert set(Label.objects.filter(run=run).values_list("name", flat=True)) == {"false alarm: length collapse"}
    signals = owner_client.get(reverse("run_health_json", args=[run.pk])).json()["signals"]
    dismissed = next(s for s in signals if s["key"] == "detector/length_collapse")
    assert dismissed["level"] == "dismissed" and dismissed["verdict"]["verdict"] == "dismissed"
    assert signals[-1]["key"] == "detector/length_collapse"  # after what still needs a look
    # a new step with the same collapse: other rollouts behind it, so it is raised again
    events = [json.loads(line) for line in gzip.open(DEMO_EVENTS, "rt")]
    last = [e for e in events if e.get("step") == 30]
    ingest(run, *[{**e, "step": 31} for e in last])
    raised = detectors(owner_client, run)["length_collapse"]
    assert raised["level"] == "warn" and "verdict" not in raised and raised["evidence"] != collapse["evidence"]
    assert 31 in {r.step for r in linked(run, raised["url"])}


def test_a_teammate_gives_a_verdict_and_an_outsider_gets_404(run, owner, member, outsider, owner_client):
    team = Group.objects.create(name="reviewers")
    team.user_set.add(owner, member)
    RunShare.objects.create(run=run, team=team)
    diversity = detectors(owner_client, run)["group_diversity"]
    assert verdict(api_client(outsider), run, diversity, "dismiss").status_code == 404
    assert verdict(api_client(member), run, diversity, "dismiss").status_code == 201
    assert AlertVerdict.objects.get(run=run).user == member
    # a later verdict on the same evidence replaces it
    assert verdict(api_client(owner), run, {**diversity, "level": "dismissed"}, "confirm").status_code == 201
    assert AlertVerdict.objects.get(run=run).verdict == "confirmed"


@pytest.mark.parametrize(
    "body, status, says",
    [
        ({"key": "detector/length_collapse", "evidence": "0" * 16, "verdict": "dismiss"}, 404, "no such alert"),
        ({"key": "detector/nothing", "evidence": "{evidence}", "verdict": "dismiss"}, 404, "no such alert"),
        ({"key": "detector/length_collapse", "evidence": "{evidence}", "verdict": "maybe"}, 400, "confirm or dismiss"),
        ({"key": 1, "evidence": "{evidence}", "verdict": "dismiss"}, 400, "are text"),
        ({"key": "detector/length_collapse", "evidence": "{evidence}", "verdict": "dismiss", "x": 1}, 400, "send"),
        (
            {"key": "detector/length_collapse", "evidence": "{evidence}", "verdict": "dismiss", "note": "a\x00"},
            400,
            "holds the control character U+0000",
        ),
    ],
)
def test_a_hostile_verdict_is_refused_and_stores_nothing(run, owner, owner_client, body, status, says):
    evidence = detectors(owner_client, run)["length_collapse"]["evidence"]
    body = {k: (evidence if v == "{evidence}" else v) for k, v in body.items()}
    response = logged_in(owner).post(
        f"/api/runs/{run.pk}/alerts/verdicts", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == status and says in response.json()["detail"]
    assert not AlertVerdict.objects.exists() and not Label.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_in_chromium_a_false_alarm_is_dismissed_from_the_health_list(web_server, run, page):
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/")
    alert = page.locator("#health li[data-key='detector/length_collapse']")
    alert.locator("button[data-verdict=dismiss]").click()
    page.locator("#health li.dismissed[data-key='detector/length_collapse'] .badge.verdict").wait_for()
    assert page.locator("#health li.dismissed .badge.verdict").inner_text() == "dismissed by owner"
    assert AlertVerdict.objects.get(run=run).verdict == "dismissed"
    assert Label.objects.filter(run=run, name="false alarm: length collapse").count() == 48
