"""What the delete tests share: a finished run with rollouts, metrics and a folder holding two models, and a team
the owner shares with."""

import shutil

import pytest
from django.contrib.auth.models import Group

from rewards.models import RewardFunction
from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event


def with_models(run, *keys):
    """Give the run's folder loadable models (a config.json each) and an event log, as a finished run leaves it."""
    for key in keys:
        folder = run.run_dir / "output" / key
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text("{}")
    (run.run_dir / "events-1.jsonl").write_text("{}\n")
    return run


@pytest.fixture
def finished_run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="old run")
    ingest(
        run,
        rollouts_event(1, [("1+1?", [("2", [1.0, 1.0]), ("3", [0.0, 0.5])])]),
        metrics_event(1, reward=1.0, loss=0.1),
    )
    run.refresh_from_db()
    yield with_models(run, "final", "checkpoint-1")
    shutil.rmtree(run.run_dir, ignore_errors=True)


@pytest.fixture
def team(owner, member):
    team = Group.objects.create(name="lab")
    team.user_set.add(owner, member)
    return team


@pytest.fixture
def reward(owner):
    """One of the owner's reward functions (every user starts with the built-in library)."""
    return RewardFunction.objects.filter(owner=owner, kind=RewardFunction.Kind.REWARD).first()


def pinning(reward) -> list[dict]:
    """A run's rewards field pinning the latest version of ``reward``."""
    version = reward.latest_version
    return [{"name": reward.name, "weight": 1.0, "version_id": version.pk, "version": version.number}]


def run_from(owner, dataset_version, model: str, name: str = "follow-up"):
    """A finished run of ``owner`` that started from ``model``."""
    run = make_run(owner, dataset_version, name=name)
    run.model = model
    run.save(update_fields=["model"])
    return run
