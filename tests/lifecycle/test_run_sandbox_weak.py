"""Weak sandbox mode is visible: a run records what its reward sandboxes lacked and shows it, the reward editor says
when the operator allows weak mode, and a test in the editor reports what its sandbox lacked."""

import json

import pytest
from django.test import override_settings
from django.urls import reverse
from grpo_web_protocol.config import RewardSpec
from grpo_web_protocol.events import EventWriter

from rewards import sandbox
from rewards.models import RewardFunction
from rewards.sandbox import host as sandbox_host
from runs.models import Run
from runs.rollouts.ingest import ingest_log
from workers.training import rewarding
from workers.training.rewarding import SandboxedReward

pytestmark = pytest.mark.django_db

SOURCE = "def f(completions, **kw):\n    return [1.0] * len(completions)\n"


@pytest.fixture
def run(owner, dataset_version):
    return Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "mine", "source": SOURCE, "entrypoint": "f", "weight": 1.0}],
        config={"max_steps": 5},
        total_steps=5,
    )


class NoPrivateRoot(sandbox.Sandbox):
    """A sandbox that cannot make a private mount root, on the host's uid: as in a container without
    CAP_SYS_ADMIN or user namespaces, under the Dockerfile's ``USER app``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs, private_mounts=False)


def score_once(log, allow_weak: bool, n: int = 2) -> list:
    events = EventWriter(str(log))
    try:
        reward = SandboxedReward(
            RewardSpec(name="mine", source=SOURCE, entrypoint="f"),
            slot=11,
            events=events,
            max_faults=3,
            allow_weak=allow_weak,
        )
        try:
            return reward(["a"] * n)
        finally:
            reward.close()
    finally:
        events.close()


def test_a_reward_in_weak_mode_is_recorded_and_shown_on_its_run(run, owner_client, tmp_path, monkeypatch):
    real = sandbox_host.sandbox_support
    monkeypatch.setattr(sandbox_host, "sandbox_support", lambda: {**real(), "can_setuid": False})
    monkeypatch.setattr(rewarding, "Sandbox", NoPrivateRoot)  # the class the training program starts
    log = tmp_path / "events.jsonl"
    assert score_once(log, allow_weak=True) == [1.0, 1.0]
    written = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["type"] for e in written] == ["reward_sandbox"]
    ingest_log(run, log)
    run.refresh_from_db()
    assert any(w.startswith("no private mount root") for w in run.sandbox_weak["mine"])
    page = owner_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert 'id="sandbox-weak"' in page and "no private mount root" in page


def test_a_reward_with_full_isolation_records_nothing(run, tmp_path):
    log = tmp_path / "events.jsonl"
    assert score_once(log, allow_weak=False, n=1) == [1.0]
    assert log.read_text() == ""


def test_the_reward_editor_says_when_weak_mode_is_allowed(owner, owner_client):
    rf = RewardFunction.objects.filter(owner=owner).first()
    url = reverse("reward_detail", args=[rf.pk])
    with override_settings(GRPO_SANDBOX_ALLOW_WEAK=True):
        assert 'id="sandbox-weak-mode"' in owner_client.get(url).content.decode()
    with override_settings(GRPO_SANDBOX_ALLOW_WEAK=False):
        assert 'id="sandbox-weak-mode"' not in owner_client.get(url).content.decode()
