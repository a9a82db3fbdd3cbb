"""The detectors of a reward hack that needs no change over time, the demo's own: the tiny model writes ``4444…`` for
every arithmetic prompt (accuracy 0, digit_ratio 0.94), which the older detectors (a share that changes, repetition in
64+ characters) miss. On the demo run's event log four fire, each linking to the rollouts that show it: one reward
function carrying the total while the other stays flat, completion lengths collapsed to the limit, groups of
near-identical completions, one answer for every prompt. On a healthy run no detector fires, and a format reward
learned before the accuracy reward is quiet once the accuracy reward rises.

``data/demo_run_events.jsonl.gz`` is the event log of ``workers.training.train.run`` with the demo's defaults
(GRPOFields(): 30 steps, G=8, seed 42) on the tiny model and ``arithmetic_rows(64)``, rewards digit_ratio (1.0) and
think_format (0.5), as in ``tests/workers/test_training_program.py``; regenerate it the same way if the program's
output changes (the tests below read its last steps: all 16 tokens, ``4444…``)."""

import gzip
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from django.urls import reverse

from runs.rollouts.detectors import answer_key
from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event
from tests.rollouts.test_detectors import detectors, linked

pytestmark = pytest.mark.django_db

DEMO_EVENTS = Path(__file__).parent / "data" / "demo_run_events.jsonl.gz"

HACK_DETECTORS = {"reward_carried", "length_collapse", "group_diversity", "prompt_blind_answers"}


def demo_run(owner, dataset_version, **fields):
    events = [json.loads(line) for line in gzip.open(DEMO_EVENTS, "rt")]
    config = {"num_generations": 8, "max_steps": 30, "per_device_train_batch_size": 16}
    run = make_run(owner, dataset_version, rewards=("digit_ratio", "think_format"), config=config, **fields)
    run.rewards[1]["weight"] = 0.5
    run.save(update_fields=["rewards"])
    ingest(run, *events)
    return run


def test_the_demo_runs_digit_hack_fires_the_four_hack_detectors_each_linking_to_it(
    owner_client, owner, dataset_version
):
    run = demo_run(owner, dataset_version)
    signals = detectors(owner_client, run)
    assert {k for k, s in signals.items() if s["level"] == "warn"} == HACK_DETECTORS

    carried = signals["reward_carried"]
    assert carried["title"] == "digit_ratio carries the reward alone"
    assert carried["detail"].startswith("digit_ratio gives 100% of the reward over the last 10 steps")
    assert "sort=reward_desc" in carried["url"]
    assert {r.step for r in linked(run, carried["url"])} == set(range(21, 31))

    collapse = signals["length_collapse"]
    assert collapse["detail"].startswith("100% of the last 3 steps' completions are 16 tokens long (cut at")
    rows = linked(run, collapse["url"])
    assert len(rows) == 48 and {r.step for r in rows} == {28, 29, 30}
    assert {r.length for r in rows} == {16} and all(r.truncated for r in rows)

    diversity = signals["group_diversity"]
    assert diversity["detail"].startswith("6 of the 6 groups of the last 3 steps hold near-identical completions")
    rows = linked(run, diversity["url"])
    groups = Counter((r.step, r.group) for r in rows)
    assert len(groups) == 5 and set(groups.values()) == {8}  # whole groups, 40 examples
    assert {r.step for r in rows} <= {28, 29, 30} and all("4444" in r.completion for r in rows)

    blind = signals["prompt_blind_answers"]
    assert blind["detail"].startswith("100% of the 6 prompts of the recent steps get the same most common answer '4'")
    rows = linked(run, blind["url"])
    assert {answer_key(r.completion) for r in rows} == {"4"}
    assert len({r.prompt_key for r in rows}) == 6 and all(r.columns["answer"] != "4" for r in rows)


def test_the_hack_detectors_thresholds_are_the_runs_own(owner_client, owner, dataset_version):
    raised = {"carry_share": 1.0, "length_collapse_share": 1.0, "similar_groups_share": 1.0, "same_answer_share": 1.0}
    run = demo_run(owner, dataset_version, detector_thresholds=raised)
    signals = detectors(owner_client, run)
    assert {k: signals[k]["level"] for k in HACK_DETECTORS} == dict.fromkeys(HACK_DETECTORS, "ok")
    assert all(signals[k]["url"] is None for k in HACK_DETECTORS)


TEMPLATES = (
    "{a} + {b}: add the units, then the tens. \\boxed{{{x}}}",
    "<think>{a} plus {b} is {x}</think> \\boxed{{{x}}}",
    "Counting up {b} from {a} gives {x}. So the answer is \\boxed{{{x}}}.",
    "The sum of {a} and {b} is {x}.",
    "{b} + {a} = {x}, the answer is \\boxed{{{x}}}",
    "<think>{a} and {b} make {x}</think> I get {x}.",
)


def healthy_step(step: int, noise: random.Random, *, right: float) -> tuple[dict, dict]:
    """Four prompts of four completions each in different words; a share ``right`` of them correct, the others one
    off; accuracy and a digit_ratio that varies. The rollouts event, and TRL's metrics for it."""
    groups, gold = [], []
    for g in range(4):
        a, b = noise.randint(2, 60), noise.randint(2, 60)
        completions = []
        for template in noise.sample(TEMPLATES, 4):
            correct = noise.random() < right
            x = a + b if correct else a + b + noise.choice((-1, 1))
            completions.append((template.format(a=a, b=b, x=x), [1.0 if correct else 0.0, noise.uniform(0.15, 0.35)]))
        groups.append((f"What is {a} + {b}? (step {step})", completions))
        gold.append(str(a + b))
    event = rollouts_event(step, groups, lengths=[noise.randint(12, 30) for _ in range(4)])
    for row in event["rows"]:
        row["columns"] = {"answer": gold[row["group"]]}
    rewards = [r["rewards"] for r in event["rows"]]
    accuracy = sum(r[0] for r in rewards) / len(rewards)
    digits = sum(r[1] for r in rewards) / len(rewards)
    metrics = metrics_event(
        step,
        **{"rewards/accuracy/mean": accuracy, "rewards/digit_ratio/mean": digits},
        reward=accuracy + digits,
        reward_std=0.45 + noise.uniform(-0.03, 0.03),
    )
    return event, metrics


def test_a_healthy_run_fires_no_detector(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    noise = random.Random(3)
    events = []
    for step in range(1, 13):
        events += healthy_step(step, noise, right=0.3 + 0.03 * step)
    ingest(run, *events)
    signals = detectors(owner_client, run)
    assert HACK_DETECTORS | {"dominance", "ceiling", "variance_collapse", "length_drift", "reward_slope"} <= set(
        signals
    )
    assert {k: s["detail"] for k, s in signals.items() if s["level"] != "ok"} == {}


def format_first(owner, dataset_version, accuracy: list[float]):
    run = make_run(owner, dataset_version, rewards=("accuracy", "think_format"))
    think = [0.1, 0.3, 0.6, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    ingest(
        run,
        *[
            metrics_event(i + 1, **{"rewards/accuracy/mean": a, "rewards/think_format/mean": f})
            for i, (a, f) in enumerate(zip(accuracy, think))
        ],
    )
    return run


def test_a_format_reward_learned_before_the_accuracy_reward_stays_quiet_once_accuracy_rises(
    owner_client, owner, dataset_version
):
    run = format_first(owner, dataset_version, [0.0] * 7 + [0.02, 0.05, 0.08, 0.1, 0.12, 0.15, 0.2])
    s = detectors(owner_client, run)["reward_carried"]
    assert s["level"] == "ok" and s["url"] is None and s["detail"].endswith("rising")


def test_an_accuracy_reward_flat_at_zero_beside_a_learned_format_reward_fires(owner_client, owner, dataset_version):
    run = format_first(owner, dataset_version, [0.0, 0.01, 0.0, 0.02, 0.0, 0.0, 0.01, 0.0, 0.02, 0.0, 0.01, 0.0, 0, 0])
    s = detectors(owner_client, run)["reward_carried"]
    assert s["level"] == "warn" and s["title"] == "think_format carries the reward alone"
    assert "accuracy 0 and have not risen" in s["detail"] and s["step"] == 14


def test_completions_collapsing_to_a_stub_fire_and_link_to_the_stubs(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    prose = [(f"Let me work it out, adding the units first ({i}): \\boxed{{7}}", [1.0, 0.2]) for i in range(4)]
    events = [rollouts_event(s, [(f"What is {s} + 3?", prose)], lengths=[40, 42, 44, 46]) for s in range(1, 4)]
    events += [rollouts_event(s, [(f"What is {s} + 3?", prose)], lengths=[3, 3, 3, 40]) for s in range(4, 7)]
    ingest(run, *events)
    assert detectors(owner_client, run)["length_collapse"]["level"] == "ok"  # 75% of one length: not over 80%
    ingest(run, rollouts_event(7, [("What is 7 + 3?", prose)], lengths=[3, 3, 3, 3]))
    s = detectors(owner_client, run)["length_collapse"]
    assert s["level"] == "warn" and "stub" in s["detail"] and "(the first steps' mean 43.0)" in s["detail"]
    rows = linked(run, s["url"])
    assert len(rows) == 10 and {r.length for r in rows} == {3} and {r.step for r in rows} == {5, 6, 7}


def test_one_answer_to_many_prompts_is_not_blind_where_it_is_their_gold_answer(owner_client, owner, dataset_version):
    """Prompts that share one gold answer (counts: "how many times...") answered right by the policy."""
    run = make_run(owner, dataset_version)
    words = ["banana", "letter", "coffee", "happy", "street", "bottle"]
    events = []
    for step, word in enumerate(words, start=1):
        event = rollouts_event(
            step,
            [
                (
                    f"How many times does a letter repeat in {word}?",
                    [(f"It appears \\boxed{{2}} times ({i})", [1.0, 0.1]) for i in range(4)],
                )
            ],
        )
        for row in event["rows"]:
            row["columns"] = {"answer": "2"}
        events.append(event)
    ingest(run, *events)
    run.detector_thresholds = {"window": 6}
    run.save(update_fields=["detector_thresholds"])
    s = detectors(owner_client, run)["prompt_blind_answers"]
    assert s["level"] == "ok" and s["detail"].startswith("0% of the 6 prompts")


def test_the_owner_sets_the_hack_detectors_thresholds_within_their_bounds(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    url = reverse("run_detectors", args=[run.pk])
    response = owner_client.post(url, {"carry_steps": "20", "group_similarity": "0.8"})
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.detector_thresholds == {"carry_steps": 20, "group_similarity": 0.8}
    for field, value in {
        "carry_steps": "1",
        "carry_share": "0.2",
        "same_answer_share": "2",
        "group_similarity": "x",
    }.items():
        refused = owner_client.post(url, {field: value, "length_collapse_share": "0.9"})
        assert refused.status_code == 400 and field in refused.context["form"].errors
        run.refresh_from_db()
        assert run.detector_thresholds == {"carry_steps": 20, "group_similarity": 0.8}
