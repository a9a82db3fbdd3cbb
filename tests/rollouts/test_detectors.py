"""Reward-hacking detectors: each fires on a run built to trigger it, links to example rollouts through the rollout
browser's URL filters (and those links find them), and takes its threshold from the run. The demo run's own hack,
and a healthy run where none fires: test_hack_detectors.py."""

import random
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from runs.rollouts.filters import RolloutFilterForm, filtered
from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event

pytestmark = pytest.mark.django_db


def detectors(client, run) -> dict:
    response = client.get(reverse("run_health_json", args=[run.pk]))
    assert response.status_code == 200
    return {
        s["key"].removeprefix("detector/"): s for s in response.json()["signals"] if s["key"].startswith("detector/")
    }


def linked(run, url: str) -> list:
    """The rollouts the alert's link shows in the browser: its query string through the browser's own form."""
    parts = urlsplit(url)
    assert parts.path == reverse("run_rollouts", args=[run.pk])
    form = RolloutFilterForm({k: v[0] for k, v in parse_qs(parts.query).items()}, run=run)
    assert form.is_valid(), form.errors
    return list(filtered(run, form.cleaned_data).order_by("step", "index"))


def steps_of(run, groups_by_step: dict[int, list]):
    ingest(run, *[rollouts_event(step, groups) for step, groups in groups_by_step.items()])


def plain(step: int, reward: float = 0.5, text: str = "4") -> list:
    """Two groups of four with mixed rewards (accuracy, digit_ratio)."""
    return [
        (f"What is {step} + {g}?", [(f"{text} {i}", [reward if i % 2 else 0.0, 0.5]) for i in range(4)])
        for g in range(2)
    ]


def test_one_function_taking_over_the_reward_fires_and_links_to_the_top_recent_completions(
    owner_client, owner, dataset_version
):
    run = make_run(owner, dataset_version)
    accuracy = [0.3, 0.35, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01, 0.0]
    digits = [0.2, 0.25, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.97]
    ingest(
        run,
        *[
            metrics_event(i + 1, **{"rewards/accuracy/mean": a, "rewards/digit_ratio/mean": d})
            for i, (a, d) in enumerate(zip(accuracy, digits))
        ],
    )
    steps_of(run, {s: plain(s) for s in range(1, 10)})
    s = detectors(owner_client, run)["dominance"]
    assert s["level"] == "warn" and s["title"] == "digit_ratio dominates the reward"
    assert s["detail"].startswith("digit_ratio gives 99% of the reward over the last 3 steps")
    rows = linked(run, s["url"])
    assert {r.step for r in rows} == {7, 8, 9}
    assert "sort=reward_desc" in s["url"]


def test_the_dominance_threshold_is_the_runs_own(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version, detector_thresholds={"dominance_share": 0.99})
    ingest(
        run,
        *[
            metrics_event(i + 1, **{"rewards/accuracy/mean": a, "rewards/digit_ratio/mean": d})
            for i, (a, d) in enumerate(zip([0.3] * 3 + [0.02] * 6, [0.2] * 3 + [0.97] * 6))
        ],
    )
    assert detectors(owner_client, run)["dominance"]["level"] == "ok"


def test_most_completions_at_the_ceiling_fire_and_link_to_them(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    early = {s: plain(s) for s in range(1, 4)}
    late = {
        s: [(f"What is {s} + {g}?", [(f"4 {i}", [1.0, 1.0 if i else 0.5]) for i in range(4)]) for g in range(3)]
        for s in range(4, 6)
    }
    last = {6: [(f"What is 6 + {g}?", [(f"4 {i}", [1.0, 1.0]) for i in range(4)]) for g in range(3)]}
    steps_of(run, {**early, **late, **last})
    s = detectors(owner_client, run)["ceiling"]
    # steps 4 to 6: 9 of each step's 12 completions, then all 12
    assert s["level"] == "warn" and s["detail"].startswith("83% of the last 3 steps' completions")
    assert "highest reward 2" in s["detail"]
    rows = linked(run, s["url"])
    assert len(rows) == 30 and {r.reward for r in rows} == {2.0} and {r.step for r in rows} == {4, 5, 6}


def test_most_but_not_enough_completions_at_the_ceiling_stay_quiet(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    steps_of(run, {s: [(f"What is {s}?", [(f"4 {i}", [1.0, 1.0 if i else 0.5]) for i in range(4)])] for s in (1, 2)})
    s = detectors(owner_client, run)["ceiling"]
    assert s["level"] == "ok" and s["detail"].startswith("75% of") and s["url"] is None


def test_a_collapsing_reward_variance_fires_and_links_to_the_zero_variance_groups(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(
        run,
        *[metrics_event(i + 1, reward_std=v) for i, v in enumerate([0.5, 0.5, 0.45, 0.4, 0.3, 0.2, 0.05, 0.04, 0.03])],
    )
    steps_of(
        run,
        {s: plain(s) for s in range(1, 7)} | {s: [("What is 1 + 1?", [("2", [1.0, 1.0])] * 4)] for s in range(7, 10)},
    )
    s = detectors(owner_client, run)["variance_collapse"]
    assert s["level"] == "warn" and "0.483 early on, 0.04 over the last 3 steps" in s["detail"]
    rows = linked(run, s["url"])
    assert len(rows) == 12 and all(r.zero_std for r in rows)


def test_a_drifting_completion_length_fires_and_links_to_the_long_ones(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    events = [rollouts_event(s, plain(s), lengths=[10, 11, 12, 13]) for s in range(1, 4)]
    events += [rollouts_event(s, plain(s), lengths=[10, 60, 62, 64]) for s in range(4, 7)]
    ingest(run, *events)
    s = detectors(owner_client, run)["length_drift"]
    assert s["level"] == "warn" and "completions grow" in s["detail"]
    rows = linked(run, s["url"])
    assert {r.length for r in rows} == {60, 62, 64} and {r.step for r in rows} == {4, 5, 6}


def test_a_sudden_reward_jump_fires_the_cusum_and_links_to_where_it_began(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    rewards = [0.1, 0.12, 0.09, 0.11, 0.1, 0.12, 0.1, 0.11, 0.5, 0.9, 0.95, 1.0]
    ingest(run, *[metrics_event(i + 1, reward=v) for i, v in enumerate(rewards)])
    steps_of(run, {s: plain(s) for s in range(1, 13)})
    s = detectors(owner_client, run)["reward_slope"]
    assert s["level"] == "warn" and s["step"] == 9 and "shifted at step 8" in s["detail"]
    assert {r.step for r in linked(run, s["url"])} == {8, 9}


def test_a_steady_rise_does_not_fire_the_cusum(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    noise = random.Random(0)
    rewards = [0.05 * i + noise.gauss(0, 0.02) for i in range(20)]
    ingest(run, *[metrics_event(i + 1, reward=v) for i, v in enumerate(rewards)])
    assert detectors(owner_client, run)["reward_slope"]["level"] == "ok"


def test_repetitive_completions_fire_and_the_link_names_them(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    loop = "the answer is 4. " * 12
    prose = "First add the tens, then the units; 23 + 19 is 30 + 12, which is 42, so the answer is \\boxed{42}."
    steps_of(
        run, {s: [(f"What is {s}?", [(loop if i < 2 else prose, [1.0, 0.2]) for i in range(4)])] for s in range(1, 4)}
    )
    s = detectors(owner_client, run)["repetition"]
    assert s["level"] == "warn" and s["detail"].startswith("50% of the last 3 steps' completions")
    rows = linked(run, s["url"])
    assert len(rows) == 6 and {r.completion for r in rows} == {loop}


def test_gold_answers_the_accuracy_reward_cannot_parse_fire_and_link_to_their_rollouts(
    owner_client, owner, dataset_version
):
    run = make_run(owner, dataset_version)
    event = rollouts_event(1, plain(1))
    for row in event["rows"]:
        if row["group"] == 1:
            row["columns"] = {"answer": "see the worked solution??"}
    ingest(run, event)
    s = detectors(owner_client, run)["gold_unparsed"]
    assert s["level"] == "warn" and s["detail"].startswith("1 of 2 gold answers")
    rows = linked(run, s["url"])
    assert len(rows) == 4 and {r.group for r in rows} == {1}


def test_without_an_accuracy_reward_gold_answers_are_not_checked(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version, rewards=("digit_ratio", "think_format"))
    ingest(run, rollouts_event(1, plain(1)))
    assert "gold_unparsed" not in detectors(owner_client, run)


def test_an_outsider_can_neither_see_nor_set_thresholds(outsider_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    url = reverse("run_detectors", args=[run.pk])
    assert outsider_client.get(url).status_code == 404
    assert outsider_client.post(url, {"ceiling_share": "0.5"}).status_code == 404
    run.refresh_from_db()
    assert run.detector_thresholds == {}


def test_the_owner_sets_thresholds(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    url = reverse("run_detectors", args=[run.pk])
    assert owner_client.get(url).status_code == 200
    response = owner_client.post(url, {"ceiling_share": "0.95", "length_z": "3", "window": "5"})
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.detector_thresholds == {"ceiling_share": 0.95, "window": 5}  # defaults are not stored
    assert owner_client.post(url, {"ceiling_share": "1.5"}).status_code == 400
