"""The attach events endpoint against generated batches (a seeded generator, a bounded number of them): every batch
is either answered 2xx with exactly the rows it sent stored (and the count answered the count stored), or answered
4xx with nothing stored. Never a 5xx, never a batch stored in part. A batch built to be wrong must be refused."""

from __future__ import annotations

import copy
import gzip
import json
import random

import pytest

from runs.models import Rollout, Run, StepMetric
from tests.attach.test_attach_api_refusals import token_client

pytestmark = pytest.mark.django_db

BATCHES = 120
G = 2


def rollouts(step: int, n: int, rng: random.Random) -> dict:
    return {
        "type": "rollouts",
        "ts": 1.0,
        "step": step,
        "num_generations": G,
        "reward_names": ["accuracy", "format"],
        "rows": [
            {
                "index": i,
                "group": i // G,
                "prompt": rng.choice(["p", "<b>x</b>", "é ✓ 中文", "\\n \" '", ""]) + str(i // G),
                "completion": rng.choice(["answer", "🙂", "a\tb\nc", "x" * rng.randint(0, 300)]) + str(i),
                "rewards": [rng.choice([0.0, 1.0, None, -2.5, 1e300]), rng.random()],
                "reward": rng.choice([0.5, None, -1.0]),
                "advantage": rng.uniform(-3, 3),
                "length": rng.randint(0, 500),
                "truncated": rng.random() < 0.2,
                "columns": rng.choice([{}, {"answer": "1"}, {"id": 2**40, "meta": {"k": [1, None, "x"]}}]),
            }
            for i in range(n)
        ],
    }


def metrics(step: int, rng: random.Random) -> dict:
    return {"type": "metrics", "ts": 2.0, "step": step, "metrics": {"loss": rng.random(), "reward": 0.5, "note": "ok"}}


def nested(depth: int):
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


# Mutations of a good batch (a list of events), each: (name, whether it surely makes the batch wrong, change). A
# change returns the events to send, or bytes to send as they are.
def _row(events, rng):
    event = next((e for e in events if e["type"] == "rollouts" and e["rows"]), None)
    return event, (rng.choice(event["rows"]) if event else None)


def dup_index(events, rng):
    event, row = _row(events, rng)
    if event and len(event["rows"]) > 1:
        other = next(r for r in event["rows"] if r is not row)
        row["index"], row["group"] = other["index"], other["group"]
    return events


def bad_group(events, rng):
    event, row = _row(events, rng)
    if row:
        row["group"] = row["index"] // G + rng.choice([1, 99, 10**6])
    return events


def bad_rewards(events, rng):
    event, row = _row(events, rng)
    if row:
        row["rewards"] = row["rewards"] + [1.0] * rng.randint(1, 3) if rng.random() < 0.5 else row["rewards"][:1]
    return events


def bad_names(events, rng):
    for e in events:
        if e["type"] == "rollouts":
            e["reward_names"] = rng.choice([["accuracy"], ["format", "accuracy"], "accuracy", [1, 2]])
    return events


def bad_generations(events, rng):
    for e in events:
        if e["type"] == "rollouts":
            e["num_generations"] = rng.choice([0, -1, 3, "2", None, 2.5])
    return events


def bad_value(events, rng):
    event, row = _row(events, rng)
    if row:
        key = rng.choice(["index", "group", "advantage", "length", "truncated", "prompt", "rewards", "columns"])
        row[key] = rng.choice([-1, "0", None, [1], {"x": 1}, 2**40, True, 1.5])
        if key == "columns" and isinstance(row[key], dict):
            row[key] = "not an object"
        if key in ("prompt",) and row[key] is None:
            row[key] = 7
    return events


def missing_key(events, rng):
    event, row = _row(events, rng)
    if row:
        del row[rng.choice(["index", "group", "prompt", "completion", "rewards", "reward", "advantage", "length"])]
    return events


def too_deep(events, rng):
    event, row = _row(events, rng)
    if rng.random() < 0.3:  # past what orjson and json read (1,024 levels): written as bytes
        depth = rng.choice([1100, 5000])
        return lines(events).replace(b'"ts": 1.0', b'"ts": 1.0, "deep": ' + b"[" * depth + b"]" * depth, 1)
    if row:
        row["columns"] = {"deep": nested(rng.choice([40, 300, 600]))}
    else:
        events[0]["deep"] = nested(50)
    return events


def huge_number(events, rng):
    text = lines(events)
    return text.replace(b'"ts": 1.0', b'"ts": 1.0, "x": 1e400', 1).replace(b'"ts": 2.0', b'"ts": -1e999', 1)


def too_many_metrics(events, rng):
    events.append({"type": "metrics", "step": 1, "metrics": {f"m{i}": 1.0 for i in range(1100)}})
    return events


def not_json(events, rng):
    text = lines(events)
    cut = rng.randint(1, max(1, len(text) - 2))
    garbage = rng.choice([b"{not json}\n", b"[1, 2]\n", b"null\n", b'{"type": "metrics", "step": 1, "metrics": NaN}\n'])
    return text[:cut] + b"\n" + garbage if rng.random() < 0.5 else text + garbage


def no_newline(events, rng):
    return lines(events)[:-1]


def bad_type(events, rng):
    events.append({"type": rng.choice(["shell", "eval", "", None, 3]), "step": 1})
    return events


def bad_step(events, rng):
    events[rng.randrange(len(events))]["step"] = rng.choice([-1, "3", None, 2**31, 1.5])
    return events


def metric_nul(events, rng):
    events.append({"type": "metrics", "step": 1, "metrics": {"bad\x00name": 1.0}})
    return events


def rows_not_list(events, rng):
    event, _ = _row(events, rng)
    if event:
        event["rows"] = {"0": {}}
    return events


def twice_in_batch(events, rng):
    event, _ = _row(events, rng)
    if event:
        events.append(copy.deepcopy(event))
    return events


SURELY_WRONG = [
    dup_index,
    bad_group,
    bad_rewards,
    bad_names,
    bad_generations,
    missing_key,
    too_deep,
    huge_number,
    too_many_metrics,
    not_json,
    no_newline,
    bad_type,
    bad_step,
    metric_nul,
    rows_not_list,
    twice_in_batch,
]
MAYBE_WRONG = [bad_value]  # some of its values happen to be good ones


def shuffled(events, rng):
    for e in events:
        if e["type"] == "rollouts":
            rng.shuffle(e["rows"])
    return events


def extra_keys(events, rng):
    for e in events:
        e["extra"] = {"note": "a client's own key", "n": [1, 2, 3]}
    return events


def blank_lines(events, rng):
    return b"\n   \n".join(lines([e]) for e in events)


def no_rows(events, rng):
    events.append({"type": "rollouts", "step": max(e["step"] for e in events) + 50, "rows": []})
    return events


GOOD = [shuffled, extra_keys, blank_lines, no_rows]


def lines(events) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def stored(run_id: int) -> dict:
    return {
        (r["step"], r["index"]): (r["group"], r["reward"], r["advantage"], r["length"])
        for r in Rollout.objects.filter(run=run_id).values("step", "index", "group", "reward", "advantage", "length")
    }


def test_every_generated_batch_is_stored_whole_or_refused_whole(owner):
    rng = random.Random(46)
    api = token_client(owner)
    made = api.post(
        "/api/attach/runs",
        {"name": "fuzz", "reward_names": ["accuracy", "format"], "config": {"num_generations": G}},
        content_type="application/json",
    ).json()
    run_id, step, refused, accepted = made["id"], 0, 0, 0
    for number in range(BATCHES):
        before_rows = stored(run_id)
        before_metrics = set(StepMetric.objects.filter(run=run_id).values_list("step", flat=True))
        taken = Run.objects.get(pk=run_id).received_bytes
        events = []
        resume = None
        if step > 1 and rng.random() < 0.1:
            resume = rng.randint(0, step - 1)
            events.append({"type": "resume", "step": resume})
            step = resume
        for i in range(rng.randint(1, 3)):
            step += 1
            events.append(rollouts(step, rng.choice([2, 4, 6, 8] if i == 0 else [0, 2, 4, 6, 8]), rng))
            if rng.random() < 0.7:
                events.append(metrics(step, rng))
        sent_events = copy.deepcopy(events)
        wrong = rng.random() < 0.5
        if wrong:
            mutation = rng.choice(SURELY_WRONG + MAYBE_WRONG)
        else:
            mutation = rng.choice(GOOD + [None])
        body = mutation(copy.deepcopy(sent_events), rng) if mutation else sent_events
        if isinstance(body, list):
            sent_events, body = body, lines(body)
        offset = taken
        if rng.random() < 0.05:
            offset, mutation, wrong = taken + rng.randint(1, 50), "gap", True
        answer = api.post(
            f"/api/attach/runs/{run_id}/events?offset={offset}",
            gzip.compress(body),
            content_type="application/x-ndjson",
            headers={"Content-Encoding": "gzip"},
            HTTP_X_RESUME_KEY=made["resume_key"],
        )
        name = getattr(mutation, "__name__", mutation)
        assert answer.status_code < 500, (number, name, answer.content[:500])
        if answer.status_code >= 400:
            refused += 1
            assert answer.status_code in (400, 409, 413), (number, name, answer.content[:300])
            assert stored(run_id) == before_rows, (number, name)
            assert set(StepMetric.objects.filter(run=run_id).values_list("step", flat=True)) == before_metrics
            assert Run.objects.get(pk=run_id).received_bytes == taken, (number, name)
            step = max([s for s, _ in before_rows] + [0])  # what the run holds: the next batch goes on from it
            continue
        accepted += 1
        assert not (wrong and mutation in SURELY_WRONG), (number, name, "a wrong batch was taken")
        expected = dict(before_rows)
        for event in sent_events:
            if event["type"] == "resume":
                expected = {key: v for key, v in expected.items() if key[0] <= event["step"]}
            elif event["type"] == "rollouts":
                for row in event["rows"]:
                    expected[(event["step"], row["index"])] = (
                        row["group"],
                        row["reward"],
                        row["advantage"],
                        row["length"],
                    )
        after = stored(run_id)
        assert after == expected, (number, name)
        sent_rows = sum(len(e["rows"]) for e in sent_events if e["type"] == "rollouts")
        assert answer.json()["rollouts"] == sent_rows, (number, name)
        assert Run.objects.get(pk=run_id).received_bytes == taken + len(body)
        assert {e["step"] for e in sent_events if e["type"] == "metrics"} <= set(
            StepMetric.objects.filter(run=run_id).values_list("step", flat=True)
        )
        step = max([s for s, _ in after] + [step])
    assert refused > BATCHES // 4 and accepted > BATCHES // 4  # both roads were taken, many times
