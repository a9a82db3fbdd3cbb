"""Reward replay against TRL itself: the training program (TRL's GRPOTrainer on the tiny model) writes rollouts with
TRL's own advantages; a replay with the run's own rewards reproduces them exactly, and a replay with a changed weight
gives the advantages TRL computed in a second run that used that weight from the start (same seed: the first
step's completions are the same, generated before any update)."""

import json

import pytest
from django.urls import reverse
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.demo_data import arithmetic_rows
from grpo_web_protocol.events import read_events

from runs.models import Replay, ReplayRow, Rollout
from runs.rollouts.ingest import ingest_events
from runs.rollouts.services import replay_create, replay_execute
from tests.rollouts.inspect_data import make_run
from workers.replay import ReplayScorer
from workers.training.train import run as train

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::FutureWarning")]

REWARDS = ("digit_ratio", "think_format")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model):
    """Event logs of the training program, by (digit_ratio's weight, scale_rewards, steps); made once each."""
    logs = {}

    def make(weight: float, scale_rewards: str, steps: int) -> list[dict]:
        key = (weight, scale_rewards, steps)
        if key not in logs:
            folder = tmp_path_factory.mktemp("train")
            data = folder / "data.jsonl"
            data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(32)))
            config = TrainConfig(
                model=str(tiny_model),
                dataset_path=str(data),
                output_dir=str(folder / "out"),
                event_log=str(folder / "events.jsonl"),
                rewards=[
                    RewardSpec("digit_ratio", weight, builtin="digit_ratio"),
                    RewardSpec("think_format", 0.5, builtin="think_format"),
                ],
                grpo=GRPOFields(
                    max_steps=steps,
                    num_generations=4,
                    per_device_train_batch_size=8,
                    scale_rewards=scale_rewards,
                    save_steps=1000,
                ),
            )
            train(config)
            logs[key] = read_events(config.event_log)[0]
        return logs[key]

    return make


def stored_run(owner, dataset_version, events, *, weight: float, scale_rewards: str):
    run = make_run(
        owner,
        dataset_version,
        rewards=REWARDS,
        config={"num_generations": 4, "per_device_train_batch_size": 8, "scale_rewards": scale_rewards},
    )
    run.rewards = [
        {"name": "digit_ratio", "weight": weight, "version_id": None, "builtin": "digit_ratio"},
        {"name": "think_format", "weight": 0.5, "version_id": None, "builtin": "think_format"},
    ]
    run.save(update_fields=["rewards"])
    ingest_events(run, events)
    return run


def replayed(run, owner, rewards, filters=None) -> Replay:
    replay = replay_create(run=run, owner=owner, rewards=rewards, filters=filters or {})
    scorer = ReplayScorer(rewards, slot_base=2000, allow_weak=True)
    try:
        replay_execute(replay_id=replay.pk, score=scorer)
    finally:
        scorer.close()
    replay.refresh_from_db()
    return replay


def test_replaying_a_run_with_its_own_rewards_reproduces_its_rewards_and_advantages_exactly(
    trained, owner, dataset_version, django_capture_on_commit_callbacks
):
    run = stored_run(owner, dataset_version, trained(1.0, "group", 2), weight=1.0, scale_rewards="group")
    with django_capture_on_commit_callbacks(execute=False):
        replay = replayed(run, owner, run.rewards)
    assert replay.status == Replay.Status.COMPLETED and replay.done == replay.total == 16
    rows = list(ReplayRow.objects.filter(replay=replay))
    assert len(rows) == 16 and {r.step for r in rows} == {1, 2}
    assert any(r.old_advantage != 0 for r in rows)  # the run learned something: not a vacuous comparison
    for r in rows:
        assert r.new_rewards == r.old_rewards
        assert r.new_reward == r.old_reward
        assert r.new_advantage == r.old_advantage
        assert r.new_rank == r.old_rank
    summary = replay.summary["steps"]
    assert [s["best_changed"] for s in summary] == [0, 0]
    assert all(s["zero_std_before"] == s["zero_std_after"] for s in summary)


@pytest.mark.parametrize("scale_rewards", ["group", "none"])
def test_replaying_with_a_changed_weight_gives_the_advantages_trl_computed_with_it(
    trained, owner, dataset_version, scale_rewards, django_capture_on_commit_callbacks
):
    original = stored_run(
        owner, dataset_version, trained(1.0, scale_rewards, 2), weight=1.0, scale_rewards=scale_rewards
    )
    reweighted = stored_run(
        owner, dataset_version, trained(-1.0, scale_rewards, 2), weight=-1.0, scale_rewards=scale_rewards
    )
    with django_capture_on_commit_callbacks(execute=False):
        replay = replayed(original, owner, reweighted.rewards)
    compared = 0
    for step in (1, 2):
        theirs = {r.index: r for r in Rollout.objects.filter(run=reweighted, step=step)}
        ours = {r.index: r for r in Rollout.objects.filter(run=original, step=step)}
        if [ours[i].completion for i in sorted(ours)] != [theirs[i].completion for i in sorted(theirs)]:
            continue  # the two runs' updates differed, so did this step's completions: nothing to compare
        rows = {r.index: r for r in ReplayRow.objects.filter(replay=replay, step=step)}
        for i, trl_row in theirs.items():
            assert rows[i].new_reward == trl_row.reward
            assert rows[i].new_advantage == pytest.approx(trl_row.advantage, abs=2e-5, rel=1e-5)  # TRL: float32
            compared += trl_row.advantage != 0
    # step 1 is always comparable (generated before any update); some advantage was not zero: not vacuous
    assert compared > 0


def test_a_replay_page_shows_progress_and_exports_its_rows(
    owner_client, owner, dataset_version, trained, django_capture_on_commit_callbacks
):
    run = stored_run(owner, dataset_version, trained(1.0, "group", 2), weight=1.0, scale_rewards="group")
    rewards = [dict(run.rewards[0], weight=2.0), run.rewards[1]]
    with django_capture_on_commit_callbacks(execute=False):
        replay = replayed(run, owner, rewards, filters={"step_min": 2})
    assert replay.steps == [2] and replay.total == 8
    data = owner_client.get(reverse("run_replay_json", args=[run.pk, replay.pk])).json()
    assert data["status"] == "completed" and data["done"] == 8 and len(data["rows"]) == 8
    assert data["summary"]["steps"][0]["step"] == 2
    export = owner_client.get(reverse("run_replay_jsonl", args=[run.pk, replay.pk]))
    with pytest.warns(Warning, match="consume asynchronous iterators"):
        lines = [json.loads(line) for line in b"".join(export).decode().splitlines()]
    assert len(lines) == 8 and {"old_reward", "new_reward", "old_advantage", "new_advantage"} <= set(lines[0])
    assert owner_client.get(reverse("run_replay", args=[run.pk, replay.pk])).status_code == 200


@pytest.fixture
def negated(owner, dataset_version, trained, django_capture_on_commit_callbacks):
    """A run's step 2 replayed with digit_ratio's weight -1: (run, replay)."""
    run = stored_run(owner, dataset_version, trained(1.0, "group", 2), weight=1.0, scale_rewards="group")
    rewards = [dict(run.rewards[0], weight=-1.0), run.rewards[1]]
    with django_capture_on_commit_callbacks(execute=False):
        return run, replayed(run, owner, rewards, filters={"step_min": 2})


def test_the_rollout_browser_shows_a_replay_beside_the_stored_values(owner_client, negated):
    run, replay = negated
    data = owner_client.get(
        reverse("run_rollouts_json", args=[run.pk]), {"replay": replay.pk, "sort": "step_asc"}
    ).json()
    by_id = {r.rollout_id: r for r in replay.rows.all()}
    for row in data["rows"]:
        if row["step"] == 2:
            assert row["replay"]["new_advantage"] == by_id[row["id"]].new_advantage
            assert row["replay"]["new_reward"] == -row["reward"]  # think_format is 0 on the tiny model
        else:
            assert row["replay"] is None  # step 1 was not replayed
    assert "replay" not in owner_client.get(reverse("run_rollouts_json", args=[run.pk])).json()["rows"][0]


def test_the_group_view_shows_a_replay_beside_the_stored_values(owner_client, negated):
    run, replay = negated
    url = reverse("run_step_json", args=[run.pk, 2])
    data = owner_client.get(url, {"replay": replay.pk}).json()
    by_index = {r.index: r for r in replay.rows.filter(step=2)}
    completions = [c for g in data["groups"] for c in g["completions"]]
    assert data["replay"] and len(completions) == 8
    for c in completions:
        assert c["replay"]["new_advantage"] == by_index[c["index"]].new_advantage
        assert c["replay"]["new_reward"] == by_index[c["index"]].new_reward
    assert "replay" not in owner_client.get(url).json()["groups"][0]["completions"][0]
