"""An attached script with TRL's default logging_steps=10 sends a rollout batch every step and metrics every tenth:
its Overview's step, its latest reward and the runs list move with every batch, each saying where it comes from."""

import pytest
from django.urls import reverse

from runs.attach.services import external_events_append, external_run_create
from runs.models import Run
from tests.attach.test_external_runs import batch

pytestmark = pytest.mark.django_db


def logged(step: int, reward: float) -> dict:
    return {"type": "metrics", "ts": 2.0, "step": step, "max_steps": 20, "metrics": {"reward": reward, "loss": 0.1}}


def rewarded(step: int, rewards: list[float]) -> dict:
    event = batch(step)
    for row, value in zip(event["rows"], rewards):
        row["rewards"], row["reward"] = [value], value
    return event


def test_an_attached_run_moves_its_overview_with_every_rollout_batch(owner, owner_client):
    run = external_run_create(
        owner=owner,
        name="logging every 10",
        origin=Run.Origin.ATTACHED,
        model="Qwen/Qwen2.5-0.5B",
        config={"num_generations": 2, "max_steps": 20, "logging_steps": 10},
        reward_names=["accuracy"],
    )
    for step in range(1, 13):
        events = [rewarded(step, [0.0, 1.0, 1.0, step / 10])]
        if step == 10:
            events.append(logged(10, 0.75))
        external_events_append(run=run, events=events)

        status = owner_client.get(reverse("run_status_json", args=[run.pk])).json()
        assert (status["step"], status["total_steps"]) == (step, 20)
        assert f"step {step} / 20" in owner_client.get(run.get_absolute_url()).content.decode()
        latest = owner_client.get(reverse("run_metrics_json", args=[run.pk])).json()["latest_reward"]
        listed = owner_client.get("/api/runs").json()[0]
        if step == 10:  # the logged reward is as new as the batch: it is taken
            assert latest == {"step": 10, "value": 0.75, "source": "metrics"}
            assert listed["latest_reward"] == 0.75
        else:
            mean = (2.0 + step / 10) / 4
            assert latest == {"step": step, "value": pytest.approx(mean), "source": "rollouts"}
            assert listed["latest_reward"] == pytest.approx(mean)
        assert listed["step"] == step
