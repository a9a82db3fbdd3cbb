"""Event log -> database: idempotent keys, offsets that advance, torn lines left for later."""

import json

import pytest
from django.db import connection

from runs.models import Rollout, Run, StepMetric
from runs.rollouts.ingest import ingest_log
from runs.textindex import unpacked_text

pytestmark = pytest.mark.django_db


def _rollouts_event(step, n=4, G=2):
    rows = [
        {
            "index": i,
            "group": i // G,
            "prompt": f"p{i // G}",
            "completion": "Wait, 12" if i == 0 else "3",
            "rewards": [1.0, None],
            "reward": 1.0,
            "advantage": (-1) ** i * 0.7,
            "length": 3,
            "truncated": False,
        }
        for i in range(n)
    ]
    return {"type": "rollouts", "ts": 1.0, "step": step, "num_generations": G, "reward_names": ["a", "b"], "rows": rows}


def _metrics_event(step):
    return {"type": "metrics", "ts": 2.0, "step": step, "metrics": {"reward": 0.1 * step, "kl": None}}


@pytest.fixture
def run(owner, dataset_version):
    return Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "a", "builtin": "digit_ratio", "weight": 1.0}],
        config={"max_steps": 5},
        total_steps=5,
    )


def test_reading_the_same_events_twice_stores_each_row_once(run, tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in [_rollouts_event(1), _metrics_event(1)]))
    ingest_log(run, log)
    run.event_offset = 0  # as after a crash between the insert and the offset update
    ingest_log(run, log)
    assert Rollout.objects.filter(run=run).count() == 4
    assert StepMetric.objects.filter(run=run).count() == 1
    assert sorted(Rollout.objects.values_list("step", "index")) == [(1, 0), (1, 1), (1, 2), (1, 3)]


def test_a_torn_last_line_waits_for_the_next_read(run, tmp_path):
    log = tmp_path / "events.jsonl"
    first = json.dumps(_rollouts_event(1)) + "\n"
    second = json.dumps(_metrics_event(1))
    log.write_text(first + second[:20])
    ingest_log(run, log)
    assert run.event_offset == len(first.encode())
    assert not StepMetric.objects.exists()
    log.write_text(first + second + "\n")
    ingest_log(run, log)
    assert StepMetric.objects.get().metrics == {"reward": 0.1, "kl": None}
    assert run.step == 1


def test_reflection_phrases_are_tagged_at_ingest(run, tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(_rollouts_event(2)) + "\n")
    ingest_log(run, log)
    assert Rollout.objects.get(index=0).reflections == ["wait"]
    assert Rollout.objects.get(index=1).reflections == []


def test_nul_characters_in_model_output_are_stored_without_nul_and_read_back_exactly(run, tmp_path):
    event = _rollouts_event(1)
    event["rows"][0]["completion"] = "12\x003"
    event["rows"][1]["prompt"] = [{"role": "user", "content": "a\x00b"}]
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(event) + "\n")
    ingest_log(run, log)
    assert Rollout.objects.get(index=0).completion == "12\x003"
    assert Rollout.objects.get(index=1).prompt == "user: a\x00b"
    with connection.cursor() as cursor:  # the column holds a visible NUL sign (PostgreSQL text cannot hold NUL)
        index = connection.ops.quote_name("index")
        cursor.execute(f"SELECT completion FROM {Rollout._meta.db_table} WHERE run_id = %s AND {index} = 0", [run.pk])
        # (on SQLite packed: runs.models.fields.PackedTextField)
        assert unpacked_text(cursor.fetchone()[0]) == "12\u2400\ufe003"


def test_a_database_that_fails_mid_batch_loses_nothing_on_the_next_read(run, tmp_path):
    """The supervisor keeps its Run object across ticks: a batch whose transaction fails (the database went away
    between its statements, or at commit) must leave that object as the database has it, or the next tick reads
    past lines never stored (seen in CI: a PostgreSQL restart lost steps 6 to 8)."""
    from django.db import OperationalError, connection

    log = tmp_path / "events.jsonl"
    events = [_rollouts_event(1), _metrics_event(1), {"type": "checkpoint", "ts": 2.5, "step": 1}]
    log.write_text("".join(json.dumps(e) + "\n" for e in events))

    def offset_write_fails(execute, sql, params, many, context):
        if sql.startswith("UPDATE") and "event_offset" in sql:
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(offset_write_fails), pytest.raises(OperationalError):
        ingest_log(run, log)
    assert (run.event_offset, run.step, run.checkpoint_step) == (0, 0, 0)
    assert not Rollout.objects.filter(run=run).exists()  # the batch's transaction was undone whole

    ingest_log(run, log)  # the next tick, the database back
    stored = Run.objects.get(pk=run.pk)
    assert (stored.event_offset, stored.step, stored.checkpoint_step) == (log.stat().st_size, 1, 1)
    assert Rollout.objects.filter(run=run).count() == 4
    assert StepMetric.objects.filter(run=run).count() == 1
