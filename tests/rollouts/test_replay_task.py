"""A reward replay end to end: started from the rollout browser's form with another version of the user's reward,
run by a real Celery worker on the sandbox queue (the user's code in the sandbox), its progress and results on the
replay's JSON."""

import pytest
from django.urls import reverse

from rewards.services import reward_create, reward_save
from runs.models import Replay
from tests.conftest import wait_for
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db(transaction=True)

V1 = "def longer(completions, **kwargs):\n    return [float(len(c)) for c in completions]\n"
V2 = "def longer(completions, **kwargs):\n    return [1.0 if '4' in c else 0.0 for c in completions]\n"


def test_a_replay_with_another_version_runs_in_the_sandbox_and_reports_progress(
    owner_client, owner, dataset_version, celery_worker
):
    function = reward_create(owner=owner, name="longer", source_code=V1, entrypoint="longer")
    v1 = function.latest_version
    v2, _ = reward_save(function=function, source_code=V2, entrypoint="longer")
    run = make_run(owner, dataset_version, rewards=("longer",))
    run.rewards = [{"name": "longer", "weight": 1.0, "version_id": v1.pk}]
    run.save(update_fields=["rewards"])
    texts = ["4", "44", "five", "4 is it"]
    ingest(
        run,
        *[
            rollouts_event(step, [(f"What is {step} + 2?", [(t, [float(len(t))]) for t in texts])])
            for step in (1, 2, 3)
        ],
    )

    response = owner_client.post(
        reverse("run_replay_new", args=[run.pk]) + "?step_min=2", {"weight-0": "2", "version-0": str(v2.pk)}
    )
    replay = Replay.objects.get(run=run)
    assert response.status_code == 302 and response["Location"] == replay.get_absolute_url()
    assert replay.steps == [2, 3] and replay.total == 8
    assert replay.rewards == [{"name": "longer", "weight": 2.0, "version_id": v2.pk}]

    url = reverse("run_replay_json", args=[run.pk, replay.pk])
    wait_for(
        lambda: owner_client.get(url).json()["status"] in ("completed", "failed"),
        timeout=120,
        what="the replay task to finish",
    )
    data = owner_client.get(url).json()
    assert data["status"] == "completed", data["error"]
    assert data["done"] == data["total"] == 8
    rows = {(r["step"], r["index"]): r for r in data["rows"]}
    for step in (2, 3):
        for i, text in enumerate(texts):
            row = rows[(step, i)]
            assert row["old_reward"] == float(len(text))
            assert row["new_reward"] == (2.0 if "4" in text else 0.0)
    # "4 is it" was the longest and so the best; under v2 three completions tie for best
    assert [s["best_changed"] for s in data["summary"]["steps"]] == [1, 1]


def test_a_replay_of_nothing_is_refused(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [("What is 2 + 2?", [("4", [1.0, 1.0]), ("5", [0.0, 0.0])])]))
    response = owner_client.post(
        reverse("run_replay_new", args=[run.pk]) + "?step_min=5", {"weight-0": "1", "weight-1": "1"}
    )
    assert response.status_code == 302 and not Replay.objects.filter(run=run).exists()


def test_an_outsider_can_neither_start_nor_read_a_replay(outsider_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [("What is 2 + 2?", [("4", [1.0, 1.0]), ("5", [0.0, 0.0])])]))
    replay = Replay.objects.create(run=run, owner=owner, rewards=run.rewards, steps=[1], total=2)
    assert outsider_client.post(reverse("run_replay_new", args=[run.pk]), {"weight-0": "2"}).status_code == 404
    for name in ("run_replay", "run_replay_json", "run_replay_jsonl"):
        assert outsider_client.get(reverse(name, args=[run.pk, replay.pk])).status_code == 404
    assert Replay.objects.filter(run=run).count() == 1


def test_in_chromium_the_replay_page_and_the_group_view_show_the_replay(web_server, page, owner, dataset_version):
    from runs.models import ReplayRow
    from tests.rollouts.test_browser_inspection import login

    run = make_run(owner, dataset_version, name="replayed run")
    ingest(run, rollouts_event(1, [("What is 2 + 2?", [("4", [1.0, 1.0]), ("<b>5</b>", [0.0, 0.0])])]))
    replay = Replay.objects.create(
        run=run,
        owner=owner,
        rewards=run.rewards,
        steps=[1],
        total=2,
        done=2,
        status=Replay.Status.COMPLETED,
        summary={
            "steps": [
                {
                    "step": 1,
                    "zero_std_before": 0.0,
                    "zero_std_after": 1.0,
                    "groups": 1,
                    "best_changed": 1,
                    "rank_changes": 1,
                    "changed_best_groups": [0],
                }
            ]
        },
    )
    for r in run.rollouts.all():
        ReplayRow.objects.create(
            replay=replay,
            rollout_id=r.pk,
            step=1,
            index=r.index,
            group=0,
            old_rewards=r.rewards,
            new_rewards=[1.0, 1.0],
            old_reward=r.reward,
            new_reward=2.0,
            old_advantage=r.advantage,
            new_advantage=0.0,
            old_rank=r.index + 1,
            new_rank=1,
        )
    login(page, web_server)
    page.goto(f"{web_server}{replay.get_absolute_url()}")
    page.wait_for_selector("#replay-steps tbody tr")
    assert page.locator("#replay-steps tbody tr td").all_inner_texts() == ["1", "0%", "100%", "1 of 1", "1"]
    assert page.locator("#replay-rows tbody tr").count() == 2
    page.click("#replay-groups")
    page.wait_for_selector("td.replay")
    assert sorted(page.locator("td.replay").all_inner_texts()) == [
        "0.000 · 2.000 · rank 1 → 1",
        "0.000 · 2.000 · rank 2 → 1",
    ]
