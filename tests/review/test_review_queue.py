"""Review queues (issue 39, item 2): a sample stratified across steps (or every match) of what the browser's filters
select; one rollout at a time with its group; progress kept; several reviewers share a queue and are never handed the
same rollout; a finished review tallies its labels with links to their rollouts."""

import json
import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.utils import timezone

from runs.models import Review, ReviewItem, Rollout, RunShare
from runs.review import services
from runs.rollouts.ingest import ingest_events
from tests.api.conftest import api_client
from tests.rollouts.inspect_data import make_run, rollouts_event

pytestmark = pytest.mark.django_db

# 10 steps of 6 groups of 4: one completion a group scores 1 (reward 1.5), the rest 0.5
GROUPS = [(f"What is {g} + {g}?", [(f"answer {g}.{k}", [float(k == 1), 0.5]) for k in range(4)]) for g in range(6)]


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="reviewed")
    ingest_events(run, [rollouts_event(step, GROUPS) for step in range(1, 11)])
    return run


@pytest.fixture
def shared(run, owner, member):
    team = Group.objects.create(name="reviewers")
    team.user_set.add(owner, member)
    RunShare.objects.create(run=run, team=team)
    return run


def make(client, run, **body):
    return client.post(f"/api/runs/{run.pk}/reviews", json.dumps(body), content_type="application/json")


def take(client, review, done=None):
    body = json.dumps({} if done is None else {"done": done})
    return client.post(f"/api/runs/{review['run']}/reviews/{review['id']}/next", body, content_type="application/json")


def test_a_sample_is_spread_across_steps_and_holds_only_matching_rollouts(run, owner):
    response = make(api_client(owner), run, filters={"reward_min": 1}, size=20, name="winners")
    assert response.status_code == 201, response.content
    review = Review.objects.get(pk=response.json()["id"])
    items = list(ReviewItem.objects.filter(review=review))
    assert len(items) == 20 and review.name == "winners" and review.query == "reward_min=1"
    rollouts = Rollout.objects.in_bulk([i.rollout_id for i in items])
    assert all(rollouts[i.rollout_id].reward >= 1 for i in items)
    assert len(set(i.rollout_id for i in items)) == 20
    per_step = [sum(1 for i in items if i.step == s) for s in range(1, 11)]
    assert per_step == [2] * 10  # 6 winners a step, evenly shared
    assert [i.step for i in items] == sorted(i.step for i in items)  # in step order


def test_every_match_or_a_refusal_past_the_limit(run, owner, monkeypatch):
    response = make(api_client(owner), run, filters={"step_min": 10, "reward_min": 1}, mode="all")
    assert response.status_code == 201 and response.json()["size"] == 6
    response = make(api_client(owner), run, filters={"step_min": 99})
    assert response.status_code == 400 and "no rollout matches" in response.json()["detail"]
    monkeypatch.setattr(services, "MAX_ITEMS", 5)
    response = make(api_client(owner), run, filters={"step_min": 10, "reward_min": 1}, mode="all")
    assert response.status_code == 400 and "match more than 5 rollouts" in response.json()["detail"]
    assert Review.objects.count() == 1


def test_one_rollout_at_a_time_with_its_group_and_the_progress_kept(run, owner):
    client = api_client(owner)
    review = {**make(client, run, filters={"step_min": 3, "step_max": 3}, mode="all").json(), "run": run.pk}
    first = take(client, review).json()
    item = first["item"]
    assert item["position"] == 0 and first["progress"] == {"total": 24, "done": 0, "held": 1, "by_reviewer": {}}
    assert item["rollout"]["step"] == 3 and item["rollout"]["completion"].startswith("answer")
    group = item["group"]
    assert group["group"] == item["rollout"]["group"] and len(group["completions"]) == 4
    assert item["rollout"]["id"] in {c["id"] for c in group["completions"]}
    # asked again without moving on: the same item (a reload, a second tab)
    assert take(client, review).json()["item"]["position"] == 0
    second = take(client, review, done=0).json()
    assert second["item"]["position"] == 1 and second["progress"]["done"] == 1
    assert second["progress"]["by_reviewer"] == {"owner": 1}
    back = client.get(f"/api/runs/{run.pk}/reviews/{review['id']}/items/1", {"previous": "true"}).json()
    assert back["item"]["position"] == 0 and back["item"]["done"] is True
    for position in range(1, 24):
        last = take(client, review, done=position).json()
    assert last["item"] is None and last["progress"]["done"] == 24


def test_two_reviewers_sharing_a_queue_are_never_handed_the_same_rollout(shared, owner, member, outsider):
    mine, theirs = api_client(owner), api_client(member)
    review = {**make(mine, shared, filters={"step_max": 1}, mode="all").json(), "run": shared.pk}
    seen = []
    a, b = take(mine, review).json()["item"], take(theirs, review).json()["item"]
    while a or b:
        seen += [x["rollout"]["id"] for x in (a, b) if x]
        a = take(mine, review, done=a["position"]).json()["item"] if a else None
        b = take(theirs, review, done=b["position"]).json()["item"] if b else None
    assert len(seen) == 24 and len(set(seen)) == 24
    progress = mine.get(f"/api/runs/{shared.pk}/reviews/{review['id']}").json()["progress"]
    assert progress["done"] == 24 and progress["by_reviewer"]["owner"] + progress["by_reviewer"]["member"] == 24
    assert take(api_client(outsider), review).status_code == 404
    assert api_client(outsider).get(f"/api/runs/{shared.pk}/reviews/{review['id']}").status_code == 404


def test_an_item_left_held_goes_to_the_next_reviewer_after_a_while_and_not_before(shared, owner, member):
    mine, theirs = api_client(owner), api_client(member)
    review = {**make(mine, shared, filters={"step_max": 1, "reward_min": 1}, mode="all").json(), "run": shared.pk}
    held = take(mine, review).json()["item"]["position"]
    assert take(theirs, review).json()["item"]["position"] == held + 1
    refused = take(theirs, review, done=held)
    assert refused.status_code == 409 and "with another reviewer" in refused.json()["detail"]
    ReviewItem.objects.filter(review_id=review["id"], position=held).update(
        claimed_at=timezone.now() - timedelta(seconds=services.CLAIM_SECONDS + 1)
    )
    assert take(theirs, review, done=held + 1).json()["item"]["position"] == held


@pytest.mark.django_db(transaction=True)
def test_reviewers_asking_at_the_same_moment_get_different_rollouts(run, owner, django_user_model):
    users = [owner] + [django_user_model.objects.create_user(f"r{i}", password="x") for i in range(5)]
    review = services.review_create(run=run, user=owner, data={"step_max": 2}, mode="all")
    handed: list[int] = []
    barrier = threading.Barrier(len(users))

    def reviewer(user):
        try:
            barrier.wait()
            item = services.review_next(review=review, user=user)
            while item is not None:
                handed.append(item.position)
                services.review_done(review=review, user=user, position=item.position)
                item = services.review_next(review=review, user=user)
        finally:
            connection.close()

    threads = [threading.Thread(target=reviewer, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(handed) == list(range(48))


def test_a_finished_review_tallies_its_labels_with_links_to_their_rollouts(run, owner, owner_client):
    client = api_client(owner)
    review = {**make(client, run, filters={"step_min": 5, "step_max": 5}, mode="all").json(), "run": run.pk}
    item = take(client, review).json()["item"]
    labeled = []
    while item:
        if item["position"] % 5 == 0:
            labeled.append(item["rollout"]["id"])
            body = {"labels": [{"name": "reward hack", "rollout": item["rollout"]["id"], "review": review["id"]}]}
            assert (
                client.post(f"/api/runs/{run.pk}/labels", json.dumps(body), content_type="application/json").status_code
                == 201
            )
        item = take(client, review, done=item["position"]).json()["item"]
    other = Rollout.objects.filter(run=run, step=1).first()  # a label outside the review is not its tally
    client.post(
        f"/api/runs/{run.pk}/labels",
        json.dumps({"labels": [{"name": "reward hack", "rollout": other.pk}]}),
        content_type="application/json",
    )
    tallies = client.get(f"/api/runs/{run.pk}/reviews/{review['id']}").json()["tallies"]
    assert [(t["name"], t["rollouts"]) for t in tallies] == [("reward hack", 5)]
    rows = owner_client.get(tallies[0]["url"].replace("/rollouts/?", "/rollouts.json?")).json()["rows"]
    assert sorted(r["id"] for r in rows) == sorted(labeled)
    page = owner_client.get(f"/runs/{run.pk}/reviews/{review['id']}/").content.decode()
    assert "reward hack</a>: 5 rollouts" in page


@pytest.mark.parametrize(
    "body, says",
    [
        ({"filters": {"stepmin": 1}}, "filters: unknown filter: stepmin"),
        ({"filters": {"step_min": "x"}}, "filters: step_min: Enter a whole number."),
        ({"filters": {"step_min": [1]}}, "filters: an object of the browser's filters"),
        ({"filters": [1]}, "filters: an object of the browser's filters"),
        ({"filters": {"label": "a\u0007"}}, "filters: label"),
        ({"filters": {"review": 999999}}, "review: not a review of this run"),
        ({"size": 0}, "size: a sample of 1 to 10,000 rollouts"),
        ({"size": 10_001}, "size: a sample of 1 to 10,000 rollouts"),
        ({"size": True}, "size a whole number"),
        ({"size": "5"}, "size a whole number"),
        ({"mode": "everything"}, "mode: 'everything' is not one of sample, all"),
        ({"name": {"x": 1}}, "name must be text"),
        ({"queue": 1}, "unknown key 'queue'"),
    ],
)
def test_a_hostile_review_request_is_refused_and_makes_nothing(run, owner, body, says):
    response = make(api_client(owner), run, **body)
    assert response.status_code == 400, response.content
    assert says in response.json()["detail"]
    assert not Review.objects.exists()


@pytest.mark.parametrize("body", [b"{", b"[1]", b"[" * 50_000 + b"]" * 50_000, b'{"done": -1}', b'{"done": "0"}'])
def test_a_hostile_next_request_gets_a_400(run, owner, body):
    client = api_client(owner)
    review = make(client, run, filters={"step_max": 1}).json()
    response = client.post(f"/api/runs/{run.pk}/reviews/{review['id']}/next", body, content_type="application/json")
    assert response.status_code == 400
    assert not ReviewItem.objects.filter(done_at__isnull=False).exists()


def test_the_browser_s_form_starts_a_review_of_its_filters(run, owner_client):
    response = owner_client.post(
        f"/runs/{run.pk}/reviews/new/?reward_min=1&step_min=9",
        {"size": "4", "mode": "sample", "name": "late winners"},
    )
    review = Review.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/reviews/{review.pk}/"
    assert review.size == 4 and {i.step for i in review.items.all()} == {9, 10}
    refused = owner_client.post(f"/runs/{run.pk}/reviews/new/?step_min=99", {"size": "4"}, follow=True)
    assert "no rollout matches these filters" in refused.content.decode() and Review.objects.count() == 1
