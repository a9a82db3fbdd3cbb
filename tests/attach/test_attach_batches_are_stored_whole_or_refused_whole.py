"""An attach client's batch is checked against its run's own shape (reward functions, group size, index range,
one row a key) and the caps every other way in has (nesting, numbers a double holds, metric names): it is stored
whole, and the count answered is the count stored, or refused whole (a 4xx naming the line and the key) with
nothing stored."""

import json

import pytest

from runs.attach.checks import MAX_METRIC_NAMES, MAX_RUN_METRIC_NAMES
from runs.models import Rollout, Run, StepMetric
from tests.attach.test_attach_api_refusals import lines, send, token_client
from tests.attach.test_external_runs import batch, metrics

pytestmark = pytest.mark.django_db


def refused_whole(api, created, data: bytes, expected: str, status: int = 400) -> None:
    before = Run.objects.get(pk=created["id"])
    rows = set(Rollout.objects.filter(run=created["id"]).values_list("step", "index"))
    answer = send(api, created, data, before.received_bytes)
    assert answer.status_code == status, answer.content
    assert expected in answer.json()["detail"], answer.json()
    after = Run.objects.get(pk=created["id"])
    assert set(Rollout.objects.filter(run=created["id"]).values_list("step", "index")) == rows
    assert after.received_bytes == before.received_bytes


def with_rows(event: dict, change) -> dict:
    event = json.loads(json.dumps(event))
    change(event["rows"])
    return event


def test_duplicate_row_indexes_are_refused_whole(attached):
    api, created = attached

    def twice(rows):
        rows[3]["index"], rows[3]["group"] = 2, 1

    refused_whole(api, created, lines(with_rows(batch(1), twice)), "rows[3].index: 2 again (rows[2] has it)")


def test_one_key_on_two_lines_of_a_batch_is_refused_whole(attached):
    api, created = attached
    first = batch(1, n=2)
    second = with_rows(batch(1, n=4), lambda rows: rows.__delitem__(slice(0, 1)))  # indexes 1, 2, 3: 1 again
    refused_whole(api, created, lines(first, second), "step 1, index 1 is sent twice in this batch (also on line 1)")


def test_keys_sent_again_without_a_resume_marker_are_refused_not_counted(attached):
    api, created = attached
    first = lines(batch(1))
    assert send(api, created, first, 0).json()["rollouts"] == 4
    # the same step's rows as new spool bytes (not the bytes sent again): the run holds them already
    refused_whole(api, created, lines(batch(1)), "step 1: the run holds rows of index 0, 1, 2, 3 already")
    # after a resume marker at step 0 the step is trained again: its new rows take the keys
    again = send(api, created, lines({"type": "resume", "step": 0}, batch(1)), len(first))
    assert again.status_code == 200 and again.json()["rollouts"] == 4, again.content


def test_more_rewards_than_the_run_has_reward_functions_are_refused_whole(attached):
    api, created = attached

    def five(rows):
        rows[1]["rewards"] = [1.0, 0.0, 1.0, 0.0, 1.0]

    refused_whole(api, created, lines(with_rows(batch(1), five)), "rows[1].rewards: 5 values for this run's 1 reward")
    other = {**batch(1), "reward_names": ["accuracy", "format"]}
    refused_whole(api, created, lines(other), "reward_names: ['accuracy', 'format'], not this run's ['accuracy']")


def test_a_group_outside_the_group_size_is_refused_whole(attached):
    api, created = attached

    def group_99(rows):
        rows[2]["group"] = 99

    refused_whole(api, created, lines(with_rows(batch(1), group_99)), "rows[2].group: 99, not index // num_generations")
    refused_whole(api, created, lines({**batch(1), "num_generations": 0}), "num_generations: must be an integer from 1")

    def far(rows):
        rows[0]["index"], rows[0]["group"] = 10**6, 5 * 10**5

    refused_whole(api, created, lines(with_rows(batch(1), far)), "rows[0].index: 1000000, past the 100000 rows")


def test_the_group_size_is_the_runs_own(owner):
    api = token_client(owner)
    made = api.post(
        "/api/attach/runs",
        {"name": "g4", "reward_names": ["accuracy"], "config": {"num_generations": 4}},
        content_type="application/json",
    ).json()
    refused_whole(api, made, lines(batch(1)), "num_generations: 2, not this run's 4")
    event = {k: v for k, v in batch(1).items() if k != "num_generations"}  # groups of 2, the event saying nothing
    refused_whole(api, made, lines(event), "rows[2].group: 1, not index // num_generations (2 // 4 = 0)")
    fitting = with_rows(event, lambda rows: [row.update(group=0) for row in rows])
    assert send(api, made, lines(fitting), 0).json()["rollouts"] == 4


def test_a_good_batch_answers_the_count_it_stored(attached):
    api, created = attached
    answer = send(api, created, lines(batch(1, n=6), metrics(1), batch(2, n=2)), 0)
    assert answer.status_code == 200 and answer.json()["rollouts"] == 8
    assert Rollout.objects.filter(run=created["id"]).count() == 8


def nested(depth: int):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [33, 900, 1100, 5000])
def test_a_line_nested_deep_is_a_400_naming_it(attached, depth):
    api, created = attached
    deep = b'"answer": {"deep": ' + b"[" * depth + b"]" * depth + b"}"
    refused_whole(api, created, lines(batch(1)).replace(b'"answer": "1"', deep, 1), "nested more than 32 levels deep")
    top = b'{"type": "metrics", "step": 1, "metrics": {}, "x": ' + b"[" * depth + b"]" * depth + b"}\n"
    refused_whole(api, created, top, "nested more than 32 levels deep")


def test_a_value_nested_as_deep_as_a_dataset_may_hold_is_stored(attached):
    api, created = attached
    deep = with_rows(batch(1), lambda rows: rows[0]["columns"].update(deep=nested(32)))
    assert send(api, created, lines(deep), 0).json()["rollouts"] == 4
    assert Rollout.objects.get(run=created["id"], index=0).columns["deep"] == nested(32)


@pytest.mark.parametrize("where", ["columns", "step_scores", "metrics", "extra"])
def test_a_number_past_a_double_is_refused_not_stored_as_null(attached, where):
    api, created = attached
    line = {
        "columns": lines(batch(1)).replace(b'"answer": "1"', b'"answer": 1e400', 1),
        "step_scores": lines(batch(1)).replace(
            b'"step_scores": null', b'"step_scores": {"split": "x", "scores": [1e400]}', 1
        ),
        "metrics": b'{"type": "metrics", "step": 1, "metrics": {"loss": 1e400}}\n',
        "extra": b'{"type": "metrics", "step": 1, "metrics": {}, "note": -1e400}\n',
    }[where]
    refused_whole(api, created, line, "1e400 is past the range of a double")
    assert not StepMetric.objects.filter(run=created["id"]).exists()


def test_metric_names_are_capped_as_everywhere(attached):
    api, created = attached
    many = {"type": "metrics", "step": 1, "metrics": {f"m{i}": 0.5 for i in range(100_000)}}
    refused_whole(api, created, lines(many), "metrics: at most 1024 names in one event, not 100000")
    assert not StepMetric.objects.filter(run=created["id"]).exists()


def test_a_run_holds_at_most_its_cap_of_distinct_metric_names(attached):
    # each event within the per-event cap, the run past its own: as the sandbox caps a function's names for a run
    api, created = attached
    per_event = MAX_METRIC_NAMES - 24
    first = lines(
        *({"type": "metrics", "step": s, "metrics": {f"s{s}/m{i}": 0.5 for i in range(per_event)}} for s in (1, 2))
    )
    assert send(api, created, first, 0).status_code == 200
    again = lines({"type": "metrics", "step": 3, "metrics": {f"s2/m{i}": 0.25 for i in range(per_event)}})
    assert send(api, created, again, len(first)).status_code == 200  # names the run holds cost nothing
    held = 2 * per_event
    more = {"type": "metrics", "step": 4, "metrics": {f"s4/m{i}": 0.5 for i in range(MAX_RUN_METRIC_NAMES - held + 1)}}
    refused_whole(
        api, created, lines(more), f"at most {MAX_RUN_METRIC_NAMES} distinct metric names; it holds {held} and this"
    )
    assert sorted(StepMetric.objects.filter(run=created["id"]).values_list("step", flat=True)) == [1, 2, 3]
    fits = {"type": "metrics", "step": 4, "metrics": {f"s4/m{i}": 0.5 for i in range(MAX_RUN_METRIC_NAMES - held)}}
    assert send(api, created, lines(fits), len(first) + len(again)).status_code == 200


@pytest.mark.parametrize("ended", ["completed", "cancelled"])
def test_a_resume_marker_never_reopens_a_finished_run(attached, ended):
    api, created = attached
    first = lines(batch(1), batch(2))
    assert send(api, created, first, 0).json()["rollouts"] == 8
    Run.objects.filter(pk=created["id"]).update(status=ended)
    refused_whole(api, created, lines({"type": "resume", "step": 0}, batch(1)), f"this run is {ended}")
    run = Run.objects.get(pk=created["id"])
    assert run.status == ended and Rollout.objects.filter(run=run).count() == 8


def test_a_failed_run_is_resumed_from_its_checkpoint(attached):
    api, created = attached
    first = lines(batch(1), batch(2))
    send(api, created, first, 0)
    api.post(
        f"/api/attach/runs/{created['id']}/finish",
        {"resume_key": created["resume_key"], "failed": True, "error": "CUDA out of memory"},
        content_type="application/json",
    )
    again = send(api, created, lines({"type": "resume", "step": 1}, batch(2)), len(first))
    assert again.status_code == 200, again.content
    run = Run.objects.get(pk=created["id"])
    assert run.status == Run.Status.RUNNING and Rollout.objects.filter(run=run).count() == 8


@pytest.mark.parametrize("depth", [40, 600, 900])
def test_a_config_nested_deep_is_a_400(owner, depth):
    config = {"max_steps": 3}
    node = config
    for _ in range(depth):
        node["x"] = {}
        node = node["x"]
    answer = token_client(owner).post(
        "/api/attach/runs", {"name": "deep", "config": config}, content_type="application/json"
    )
    assert answer.status_code == 400 and "config: nested more than 32 levels deep" in answer.json()["detail"]
    assert not Run.objects.exists()


def test_a_user_has_at_most_the_attached_runs_the_setting_allows_running(owner, outsider, settings):
    settings.GRPO_ATTACH_MAX_RUNNING = 2
    api = token_client(owner)

    def create():
        return api.post("/api/attach/runs", {"name": "r"}, content_type="application/json")

    made = [create().json() for _ in range(2)]
    refused = create()
    assert refused.status_code == 429
    assert "you have 2 attached runs running, the limit (GRPO_ATTACH_MAX_RUNNING)" in refused.json()["detail"]
    assert Run.objects.filter(owner=owner).count() == 2
    # another user has limits of their own; a run that ends makes room
    assert token_client(outsider).post("/api/attach/runs", {}, content_type="application/json").status_code == 200
    api.post(
        f"/api/attach/runs/{made[0]['id']}/finish",
        {"resume_key": made[0]["resume_key"]},
        content_type="application/json",
    )
    assert create().status_code == 200
