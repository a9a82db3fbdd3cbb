"""Labels (issue 39, item 1): a rollout, a group or a step carries reviewers' labels, each with its author, time,
note and the span of the completion it points at; teammates of a shared run see and add them, two who disagree both
show; labels filter the browser, the API and the exports, and count per step. A batch is stored whole or refused
whole, naming the item and key; an outsider gets 404."""

import io
import json

import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import Group

from runs.models import DatasetVersion, Label, Rollout, RunShare
from runs.rollouts.ingest import ingest_events
from runs.rollouts.labels import MAX_BATCH
from tests.api.conftest import api_client
from tests.rollouts.inspect_data import make_run, rollouts_event
from tests.rollouts.test_rollout_exports import content

pytestmark = pytest.mark.django_db

GROUPS = [
    (f"What is {g} + {g}?", [(f"answer {g}.{k} 🙂 is {2 * g}", [float(k == 1), 0.5]) for k in range(4)])
    for g in range(6)
]


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="labeled")
    ingest_events(run, [rollouts_event(1, GROUPS), rollouts_event(2, GROUPS)])
    return run


@pytest.fixture
def shared(run, owner, member):
    team = Group.objects.create(name="reviewers")
    team.user_set.add(owner, member)
    RunShare.objects.create(run=run, team=team)
    return run


def post(client, run, *labels):
    return client.post(
        f"/api/runs/{run.pk}/labels", json.dumps({"labels": list(labels)}), content_type="application/json"
    )


def rollout(run, step=2, group=3, k=1) -> Rollout:
    return Rollout.objects.get(run=run, step=step, group=group, index=group * 4 + k)


def test_labels_on_a_rollout_a_group_and_a_step_keep_their_author_note_and_span(run, owner):
    r = rollout(run)
    hack = r.completion.index("🙂")
    response = post(
        api_client(owner),
        run,
        {"name": "reward hack", "rollout": r.pk, "note": "the <b>smile</b> pays", "span": [hack, hack + 2]},
        {"name": "garbled", "step": 2, "group": 4},
        {"name": "  format   only ", "step": 1},
    )
    assert response.status_code == 201, response.content
    assert response.json()["created"] == 3
    on_rollout, on_group, on_step = Label.objects.filter(run=run).order_by("pk")
    assert (on_rollout.rollout_id, on_rollout.step, on_rollout.group, on_rollout.target) == (r.pk, 2, 3, "rollout")
    assert (on_rollout.span_start, on_rollout.span_end, on_rollout.author) == (hack, hack + 2, owner)
    assert on_rollout.note == "the <b>smile</b> pays"  # stored as typed; every page shows it as text
    assert (on_group.target, on_group.step, on_group.group) == ("group", 2, 4)
    assert (on_step.target, on_step.name) == ("step", "format only")
    listed = api_client(owner).get(f"/api/runs/{run.pk}/labels").json()
    assert [(x["name"], x["on"], x["author"]) for x in listed["labels"]] == [
        ("reward hack", "rollout", "owner"),
        ("garbled", "group", "owner"),
        ("format only", "step", "owner"),
    ]
    assert listed["labels"][0]["span"] == [hack, hack + 2] and listed["next_cursor"] is None


def test_the_same_label_sent_twice_is_stored_once_and_said_so(run, owner):
    r = rollout(run)
    client = api_client(owner)
    assert post(client, run, {"name": "reward hack", "rollout": r.pk}).json()["created"] == 1
    again = post(client, run, {"name": "reward hack", "rollout": r.pk}, {"name": "reward hack", "rollout": r.pk})
    assert again.status_code == 201 and again.json()["created"] == 0 and again.json()["existing"] == 2
    assert Label.objects.filter(run=run).count() == 1


def test_a_teammate_labels_a_shared_run_and_two_who_disagree_both_show(shared, owner, member, outsider):
    r = rollout(shared)
    assert post(api_client(owner), shared, {"name": "reward hack", "rollout": r.pk}).status_code == 201
    assert post(api_client(member), shared, {"name": "good reasoning", "rollout": r.pk}).status_code == 201
    page = api_client(member).get(f"/api/runs/{shared.pk}/rollouts", {"ids": str(r.pk)}).json()
    labels = page["rows"][0]["labels"]
    assert sorted((x["name"], x["author"], x["mine"]) for x in labels) == [
        ("good reasoning", "member", True),
        ("reward hack", "owner", False),
    ]
    # only its author removes a label
    owners = next(x for x in labels if x["author"] == "owner")
    assert api_client(member).delete(f"/api/runs/{shared.pk}/labels/{owners['id']}").status_code == 403
    assert api_client(owner).delete(f"/api/runs/{shared.pk}/labels/{owners['id']}").status_code == 204
    assert list(Label.objects.filter(run=shared).values_list("name", flat=True)) == ["good reasoning"]
    # an outsider can neither read, add nor remove
    theirs = Label.objects.get(run=shared)
    assert post(api_client(outsider), shared, {"name": "x", "rollout": r.pk}).status_code == 404
    assert api_client(outsider).get(f"/api/runs/{shared.pk}/labels").status_code == 404
    assert api_client(outsider).delete(f"/api/runs/{shared.pk}/labels/{theirs.pk}").status_code == 404
    assert api_client(member, "read").delete(f"/api/runs/{shared.pk}/labels/{theirs.pk}").status_code == 403
    assert Label.objects.filter(run=shared).count() == 1


def test_a_label_filters_the_browser_the_api_and_the_exports_and_is_a_column_there(run, owner, owner_client):
    hacked, other = rollout(run, group=3, k=1), rollout(run, group=0, k=0)
    post(
        api_client(owner),
        run,
        {"name": "reward hack", "rollout": hacked.pk, "note": "n"},
        {"name": "reward hack", "step": 1, "group": 5},  # the whole group: its 4 rollouts
        {"name": "good reasoning", "rollout": other.pk},
    )
    expected = {hacked.pk} | set(Rollout.objects.filter(run=run, step=1, group=5).values_list("pk", flat=True))
    api_rows = api_client(owner).get(f"/api/runs/{run.pk}/rollouts", {"label": "reward hack"}).json()["rows"]
    assert {r["id"] for r in api_rows} == expected
    page = owner_client.get(f"/runs/{run.pk}/rollouts.json", {"label": "reward hack"}).json()["rows"]
    assert {r["id"] for r in page} == expected
    assert {lab["on"] for r in page for lab in r["labels"]} == {"rollout", "group"}
    lines = [
        json.loads(x)
        for x in content(owner_client.get(f"/runs/{run.pk}/rollouts.jsonl", {"label": "reward hack"})).splitlines()
    ]
    assert len(lines) == 5 and all(line["labels"][0]["name"] == "reward hack" for line in lines)
    table = pq.read_table(io.BytesIO(content(owner_client.get(f"/runs/{run.pk}/rollouts.parquet"))))
    labels = [x for x in table.column("labels").to_pylist() if x]
    assert sorted(lab["name"] for x in labels for lab in x) == ["good reasoning"] + ["reward hack"] * 5
    note = next(lab for x in labels for lab in x if lab["on"] == "rollout" and lab["name"] == "reward hack")
    assert (note["note"], note["author"]) == ("n", "owner")
    assert owner_client.get(f"/runs/{run.pk}/rollouts.json", {"label": "never used"}).json()["rows"] == []


def test_each_label_is_counted_per_step(run, owner):
    post(
        api_client(owner),
        run,
        {"name": "reward hack", "rollout": rollout(run, step=1).pk},
        {"name": "reward hack", "rollout": rollout(run, step=2).pk},
        {"name": "reward hack", "rollout": rollout(run, step=2, k=2).pk},
        {"name": "garbled", "step": 2},
    )
    counts = api_client(owner).get(f"/api/runs/{run.pk}/labels/counts").json()
    assert counts["labels"] == [
        {"name": "reward hack", "steps": [1, 2], "counts": [1, 2], "total": 3},
        {"name": "garbled", "steps": [2], "counts": [1], "total": 1},
    ]
    assert counts["names"][:5] == [
        "reward hack",
        "correct but scored wrong",
        "format only",
        "good reasoning",
        "garbled",
    ]


@pytest.mark.parametrize(
    "label, says",
    [
        ({"name": "", "step": 1}, "label.name: is empty"),
        ({"name": "x" * 65, "step": 1}, "label.name: is 65 characters; at most 64"),
        ({"name": "a\x00b", "step": 1}, "label.name: holds the control character U+0000"),
        ({"name": ["x"], "step": 1}, "label.name: must be text"),
        ({"name": "x", "step": 1, "note": "n" * 4001}, "label.note: is 4,001 characters; at most 4,000"),
        ({"name": "x", "step": 1, "note": "a\x1bb"}, "label.note: holds the control character U+001B"),
        ({"name": "x"}, "label: say what is labeled"),
        ({"name": "x", "step": -1}, "label.step: must be a whole number"),
        ({"name": "x", "step": True}, "label.step: must be a whole number"),
        ({"name": "x", "step": 2**70}, "label.step: must be a whole number"),
        ({"name": "x", "step": 99}, "label.step: run {run} logged no step 99"),
        ({"name": "x", "step": 1, "group": 6}, "label.group: no group 6 at step 1"),
        ({"name": "x", "rollout": 0}, "label.rollout: no rollout 0 in run {run}"),
        ({"name": "x", "rollout": "{r}", "step": 1}, "not both a rollout and a step"),
        ({"name": "x", "step": 1, "span": [0, 1]}, "label.span: only a label on a rollout"),
        ({"name": "x", "rollout": "{r}", "span": [3, 3]}, "label.span: start 3 is not before end 3"),
        ({"name": "x", "rollout": "{r}", "span": [0, 10_000]}, "label.span: ends at 10000, past the completion's end"),
        ({"name": "x", "rollout": "{r}", "span": "0-4"}, "label.span: must be [start, end]"),
        ({"name": "x", "rollout": "{r}", "span": [0, 1.5]}, "label.span: must be [start, end]"),
        ({"name": "x", "step": 1, "author": "someone else"}, "label: unknown key 'author'"),
        ("reward hack", "label: must be an object"),
    ],
)
def test_a_hostile_label_is_refused_naming_its_key_and_nothing_is_stored(run, owner, label, says):
    r = rollout(run)
    if isinstance(label, dict):
        label = {k: (r.pk if v == "{r}" else v) for k, v in label.items()}
    response = post(api_client(owner), run, label)
    assert response.status_code == 400, response.content
    assert says.format(run=run.pk) in response.json()["detail"]
    assert not Label.objects.exists()


def test_a_span_counts_utf16_units_as_the_page_does(run, owner):
    r = rollout(run)
    end = len(r.completion.encode("utf-16-le")) // 2  # the emoji is two units, one Python character
    assert end == len(r.completion) + 1
    assert post(api_client(owner), run, {"name": "x", "rollout": r.pk, "span": [0, end]}).status_code == 201
    refused = post(api_client(owner), run, {"name": "y", "rollout": r.pk, "span": [0, end + 1]})
    assert refused.status_code == 400 and f"({end} UTF-16 units)" in refused.json()["detail"]


def test_a_batch_with_one_bad_item_stores_none_and_names_every_bad_one(run, owner):
    r = rollout(run)
    response = post(
        api_client(owner),
        run,
        {"name": "ok", "rollout": r.pk},
        {"name": "", "rollout": r.pk},
        {"name": "ok", "step": 1, "group": 77},
    )
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "labels[1].name: is empty" in detail and "labels[2].group: no group 77" not in detail  # forms first
    assert not Label.objects.exists()
    response = post(api_client(owner), run, {"name": "ok", "rollout": r.pk}, {"name": "ok", "step": 1, "group": 77})
    assert response.status_code == 400 and "labels[1].group: no group 77 at step 1" in response.json()["detail"]
    assert not Label.objects.exists()


@pytest.mark.parametrize(
    "body, says",
    [
        (b"{not json", "the body is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "the body is"),
        (b'{"labels": []}', "send a list of 1 to 1,000 labels"),
        (b'{"labels": {"name": "x"}}', "send a list of 1 to 1,000 labels"),
        (b'{"labels": [], "extra": 1}', 'send {"labels": [...]}'),
        (b"\xff\xfe", "the body is not JSON"),
        (json.dumps({"labels": [{"name": "x", "step": 1}] * (MAX_BATCH + 1)}).encode(), "at most 1,000"),
    ],
)
def test_a_body_that_is_no_batch_of_labels_gets_a_400_that_says_why(run, owner, body, says):
    response = api_client(owner).post(f"/api/runs/{run.pk}/labels", body, content_type="application/json")
    assert response.status_code == 400 and says in response.json()["detail"]
    assert not Label.objects.exists()


def test_a_label_on_another_run_s_rollout_is_refused(run, owner, dataset_version):
    other = make_run(owner, dataset_version, name="other")
    response = post(api_client(owner), other, {"name": "x", "rollout": rollout(run).pk})
    assert (
        response.status_code == 400 and f"no rollout {rollout(run).pk} in run {other.pk}" in response.json()["detail"]
    )


def test_labels_go_with_their_run(run, owner):
    post(api_client(owner), run, {"name": "x", "rollout": rollout(run).pk})
    run.delete()
    assert not Label.objects.exists()


def test_the_label_filter_refuses_a_name_no_label_could_have(run, owner_client):
    response = owner_client.get(f"/runs/{run.pk}/rollouts.json", {"label": "a\x07b"})
    assert response.status_code == 400 and "label" in response.json()["errors"]


def test_rejection_sampling_keeps_or_drops_rows_by_label(run, owner, owner_client):
    hacked = rollout(run, step=2, group=3, k=1)
    post(api_client(owner), run, {"name": "reward hack", "rollout": hacked.pk})
    winners = Rollout.objects.filter(run=run, step=2, reward__gte=1).count()  # step 1 repeats step 2's texts
    kept = owner_client.post(
        f"/runs/{run.pk}/rollouts/sft/?step_min=2&no_label=reward+hack",
        {"threshold": "1", "name": "clean"},
        follow=True,
    )
    assert kept.status_code == 200
    clean = DatasetVersion.objects.get(dataset__name="clean")
    assert clean.row_count == winners - 1
    assert hacked.completion not in [r["completion"] for r in pq.read_table(clean.path).to_pylist()]
    owner_client.post(f"/runs/{run.pk}/rollouts/sft/?label=reward+hack", {"threshold": "1", "name": "hacks"})
    hacks = DatasetVersion.objects.get(dataset__name="hacks")
    assert hacks.row_count == 1 and pq.read_table(hacks.path).to_pylist()[0]["completion"] == hacked.completion


def test_a_reviewer_is_offered_the_built_ins_the_run_s_own_names_and_their_teams(run, owner, member, dataset_version):
    team = Group.objects.create(name="lab")
    team.user_set.add(owner, member)
    theirs = make_run(member, dataset_version, name="a teammate's")
    ingest_events(theirs, [rollouts_event(1, GROUPS)])
    RunShare.objects.create(run=theirs, team=team)
    post(api_client(member), theirs, {"name": "answer in the think block", "step": 1})
    post(api_client(owner), run, {"name": "loops forever", "step": 1}, {"name": "loops forever", "step": 2})
    names = api_client(owner).get(f"/api/runs/{run.pk}/labels/counts").json()["names"]
    assert names[:7] == [
        "reward hack",
        "correct but scored wrong",
        "format only",
        "good reasoning",
        "garbled",
        "loops forever",
        "answer in the think block",
    ]
    outsider_run = make_run(member, dataset_version, name="not shared")
    ingest_events(outsider_run, [rollouts_event(1, GROUPS)])
    post(api_client(member), outsider_run, {"name": "private name", "step": 1})
    assert "private name" not in api_client(owner).get(f"/api/runs/{run.pk}/labels/counts").json()["names"]
