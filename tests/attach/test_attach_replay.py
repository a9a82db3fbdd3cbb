"""A run attached from a plain TRL script (tests/attach/grpo_script.py) replayed against an edited version of its
reward, from the rollout browser's form: the source the client sent is the form's, the edit runs in the sandbox on
the stored completions, and the replay shows the new rewards. A reward whose source did not come with the run (one
made at run time) says it cannot be replayed; its stored rewards stand."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from runs.models import Replay, ReplayRow, Rollout
from tests.attach.test_attach_end_to_end import replayed, trained_attached

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.filterwarnings("ignore::FutureWarning")]

NAMES = ["digit_ratio", "sometimes_none", "short"]
EDITED = "def digit_ratio(completions, **kwargs):\n    return [float(c.count('1')) for c in completions]\n"


def same(a, b) -> bool:
    return (a is None or a != a) and (b is None or b != b) or a == b


def test_an_attached_run_replays_against_an_edited_reward(
    service_env, celery_worker, tiny_model, owner, owner_client, tmp_path
):
    run, out = trained_attached(service_env, tiny_model, owner, tmp_path, "--generated-reward")
    assert [r["name"] for r in run.rewards] == NAMES
    assert "def sometimes_none" in run.rewards[1]["source"] and "source" not in run.rewards[2]

    # the browser's replay form: each source the run came with, to edit; the one without says it cannot be replayed
    page = owner_client.get(reverse("run_rollouts", args=[run.pk])).content.decode()
    assert 'name="source-0"' in page and "def digit_ratio(completions, **kwargs):" in page
    assert 'name="source-1"' in page and 'name="source-2"' not in page
    assert "short: its source did not come with the run, so it cannot be replayed" in page

    # refused, nothing queued, no 5xx: a source for the function the run came without, and an edit that is not Python
    replay_url = reverse("run_replay_new", args=[run.pk]) + "?step_min=1"
    weights = {"weight-0": "1", "weight-1": "1", "weight-2": "2"}
    for posted, said in (
        ({"source-2": "def short(completions, **kw):\n    return [0.0]\n"}, "short: its source did not come with"),
        ({"source-0": "def digit_ratio(completions:\n"}, "source of digit_ratio: line 1"),
        ({"source-0": "def other(completions, **kw):\n    return []\n"}, "no top-level function named 'digit_ratio'"),
    ):
        response = owner_client.post(replay_url, {**weights, **posted})
        assert response.status_code == 302, response.status_code
        shown = [str(m) for m in get_messages(response.wsgi_request)]
        assert any(m.startswith("No replay: ") and said in m for m in shown), shown
    assert not Replay.objects.filter(run=run).exists()

    replay, data = replayed(owner_client, run, {**weights, "source-0": EDITED}, "?step_min=1")
    assert [(r["label"], r["weight"]) for r in data["rewards"]] == [
        ("digit_ratio (edited source)", 1.0),
        ("sometimes_none", 1.0),
        ("short (stored rewards: its source did not come with the run)", 2.0),
    ]
    replay_page = owner_client.get(replay.get_absolute_url()).content.decode()
    assert "digit_ratio (edited source) × 1.0" in replay_page

    # against TRL's own table: the edit's rewards of each stored completion; the unedited function, run again in
    # the sandbox, gives TRL's values; the one without a source keeps them
    rows = {(r.step, r.index): r for r in ReplayRow.objects.filter(replay=replay)}
    assert len(rows) == data["total"] == Rollout.objects.filter(run=run).count() == 16
    for step in (1, 2):
        table = pd.read_parquet(out / "completions" / f"completions_{step:05d}.parquet")
        for i, (completion, trl_none, trl_short) in enumerate(
            zip(table["completion"], table["sometimes_none"], table["short"])
        ):
            row = rows[(step, i)]
            assert row.new_rewards[0] == float(completion.count("1"))
            assert same(row.new_rewards[1], trl_none) and same(row.old_rewards[1], trl_none), (step, i)
            assert row.new_rewards[2] == trl_short
            wanted = sum(w * v for w, v in zip((1, 1, 2), row.new_rewards) if v is not None)
            assert math.isclose(row.new_reward, wanted, rel_tol=1e-6), (step, i)
    assert any(r.new_rewards[0] != r.old_rewards[0] for r in rows.values())  # the edit scores otherwise

    # the rollout browser shows the replay's rewards beside each stored completion
    browsed = owner_client.get(reverse("run_rollouts_json", args=[run.pk]) + f"?replay={replay.pk}").json()["rows"]
    assert len(browsed) == 16
    by_id = {r.rollout_id: r for r in rows.values()}
    assert all(b["replay"]["new_rewards"] == by_id[b["id"]].new_rewards for b in browsed)
