"""The bulk rollout ingest (COPY on PostgreSQL, multi-row INSERT on SQLite): derived columns, idempotency when the
log is read again in part or in full, odd text, and a long log caught up in several transactions."""

import json

import pytest

from runs.models import EvalSample, Evaluation, Rollout, StepMetric
from runs.rollouts import ingest as ingest_module
from runs.rollouts.ingest import ingest_log
from runs.text import prompt_key
from tests.rollouts.inspect_data import eval_event, make_run, metrics_event, rollouts_event

pytestmark = pytest.mark.django_db

GROUPS = [
    ("What is 2 + 2?", [("Wait, 4", [1.0, 1.0]), ("5", [0.0, 1.0])]),
    ("What is 3 + 3?", [("6", [1.0, 0.0]), ("6", [1.0, 0.0])]),
]


def write_log(path, events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def test_derived_columns_are_stored_with_each_row(owner, dataset_version, tmp_path):
    run = make_run(owner, dataset_version)
    write_log(tmp_path / "events.jsonl", [rollouts_event(1, GROUPS)])
    ingest_log(run, tmp_path / "events.jsonl")
    rows = list(
        Rollout.objects.filter(run=run)
        .order_by("index")
        .values("prompt_key", "zero_std", "reflections", "reflective", "rewards", "columns")
    )
    assert [r["prompt_key"] for r in rows] == [prompt_key("What is 2 + 2?")] * 2 + [prompt_key("What is 3 + 3?")] * 2
    assert [r["zero_std"] for r in rows] == [False, False, True, True]
    assert [(r["reflections"], r["reflective"]) for r in rows] == [(["wait"], True)] + [([], False)] * 3
    assert rows[0]["rewards"] == [1.0, 1.0] and rows[0]["columns"] == {"answer": "4"}


def test_a_log_read_again_from_the_start_adds_only_the_new_rows(owner, dataset_version, tmp_path):
    run = make_run(owner, dataset_version)
    log = tmp_path / "events.jsonl"
    write_log(log, [rollouts_event(1, GROUPS)])
    ingest_log(run, log)
    first_ids = set(Rollout.objects.filter(run=run).values_list("id", flat=True))
    write_log(log, [rollouts_event(1, GROUPS), rollouts_event(2, GROUPS), metrics_event(2, reward=1.0)])
    run.event_offset = 0  # a restarted supervisor reads the whole log again
    changed, _ = ingest_log(run, log)
    assert changed == {"steps": [1, 2], "rollouts": 8, "evaluated": []}
    assert Rollout.objects.filter(run=run).count() == 8
    assert first_ids <= set(Rollout.objects.filter(run=run).values_list("id", flat=True))
    assert StepMetric.objects.get(run=run).metrics == {"reward": 1.0}


def test_nul_characters_in_dataset_columns_are_stored_exactly(owner, dataset_version, tmp_path):
    # through the bulk path (COPY on PostgreSQL, whose jsonb refuses \u0000): read back as sent
    run = make_run(owner, dataset_version)
    event = rollouts_event(1, GROUPS)
    columns = {"answer": "4\x00", "nested": [{"x": "a\x00b \u2400"}]}
    event["rows"][0]["columns"] = columns
    write_log(tmp_path / "events.jsonl", [event])
    ingest_log(run, tmp_path / "events.jsonl")
    assert Rollout.objects.get(run=run, index=0).columns == columns


def test_text_that_needs_escaping_arrives_unchanged(owner, dataset_version, tmp_path):
    run = make_run(owner, dataset_version)
    text = 'tab\there\nnewline \\backslash \\N "quotes" </textarea><script>x</script> 😀 \u2028'
    event = rollouts_event(1, [(text, [(text, [1.0, None]), ("x", [None, None])])])
    event["rows"][0]["columns"] = {"big": 2**64 - 1, "text": text}  # the largest a dataset column holds
    write_log(tmp_path / "events.jsonl", [event])
    ingest_log(run, tmp_path / "events.jsonl")
    first, second = Rollout.objects.filter(run=run).order_by("index")
    assert first.prompt == text and first.completion == text
    assert first.rewards == [1.0, None] and second.reward is None
    assert first.columns == {"big": 2**64 - 1, "text": text}


def test_a_long_log_is_caught_up_in_several_transactions(owner, dataset_version, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest_module, "READ_LIMIT", 2000)
    run = make_run(owner, dataset_version)
    log = tmp_path / "events.jsonl"
    write_log(log, [rollouts_event(step, GROUPS) for step in range(1, 11)] + [metrics_event(10, reward=0.5)])
    transactions = []
    real = ingest_module._ingest
    monkeypatch.setattr(ingest_module, "_ingest", lambda run, events: transactions.append(1) or real(run, events))
    changed, events = ingest_log(run, log)
    assert len(transactions) > 3 and len(events) == 11
    assert [e["type"] for e in events] == ["rollouts"] * 10 + ["metrics"] and "rows" not in events[0]
    assert changed["rollouts"] == 40 and changed["steps"] == list(range(1, 11))
    assert Rollout.objects.filter(run=run).count() == 40
    assert run.event_offset == log.stat().st_size and run.step == 10


def test_half_a_surrogate_pair_from_the_model_becomes_a_replacement_character(owner, dataset_version, tmp_path):
    run = make_run(owner, dataset_version)
    event = rollouts_event(1, [("p", [("x\ud800y 😀", [1.0, 0.0]), ("z", [0.0, 0.0])])])
    write_log(tmp_path / "events.jsonl", [event])  # json.dumps writes the half as \ud800
    ingest_log(run, tmp_path / "events.jsonl")
    assert Rollout.objects.get(run=run, index=0).completion == "x\ufffdy 😀"


def test_an_evaluation_read_again_is_stored_once(owner, dataset_version, tmp_path):
    run = make_run(owner, dataset_version)
    log = tmp_path / "events.jsonl"
    right, wrong = "<think>2 + 2 = 4</think> \\boxed{4}", "\\boxed{5}"
    write_log(
        log,
        [
            eval_event(0, [("What is 2 + 2?", [(right, 1.0), (wrong, 0.0), (right, 1.0)])]),
            metrics_event(0, **{"val-core/arithmetic/acc/pass@2": 1.0}),
        ],
    )
    assert ingest_log(run, log)[0]["evaluated"] == [0]
    run.event_offset = 0
    assert ingest_log(run, log)[0]["evaluated"] == [0]
    evaluation = Evaluation.objects.get(run=run)
    assert (evaluation.kind, evaluation.step, evaluation.k, evaluation.prompts) == ("periodic", 0, 2, 1)
    assert evaluation.metrics["pass@k"] == 1.0 and evaluation.metrics["mean@k"] == 0.5
    assert list(
        EvalSample.objects.filter(evaluation=evaluation).values_list("sample", "greedy", "correct", "answer")
    ) == [(0, False, True, "4"), (1, False, False, "5"), (2, True, True, "4")]
