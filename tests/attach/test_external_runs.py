"""A run trained elsewhere (runs.attach.services): created without a dataset version, its events appended and
ingested like the app's own, and every page and API answer about it renders."""

import pandas as pd
import pytest
from django.urls import reverse

from runs.attach.checks import EventRefused
from runs.attach.services import external_events_append, external_run_create, external_run_finish
from runs.models import Rollout, Run, StepMetric

pytestmark = pytest.mark.django_db


def batch(step: int, n: int = 4) -> dict:
    return {
        "type": "rollouts",
        "ts": 1.0,
        "step": step,
        "num_generations": 2,
        "reward_names": ["accuracy"],
        "rows": [
            {
                "index": i,
                "group": i // 2,
                "prompt": f"<b>prompt {i // 2}</b>",
                "completion": f"answer {i} <script>x</script>",
                "rewards": [float(i % 2)],
                "reward": float(i % 2),
                "advantage": 0.5 if i % 2 else -0.5,
                "length": 7 + i,
                "truncated": i == 3,
                "columns": {"answer": "1"},
                "step_scores": None,
            }
            for i in range(n)
        ],
    }


def metrics(step: int) -> dict:
    return {"type": "metrics", "ts": 2.0, "step": step, "max_steps": 3, "metrics": {"reward": 0.5, "loss": 0.1}}


@pytest.fixture
def external(owner):
    return external_run_create(
        owner=owner,
        name="my script",
        origin=Run.Origin.ATTACHED,
        model="Qwen/Qwen2.5-0.5B",
        config={"num_generations": 2, "max_steps": 3, "learning_rate": 1e-6, "beta": 0.0},
        reward_names=["accuracy"],
        dataset_label="gsm8k",
        host="gpu-node-7",
        command="accelerate launch grpo.py",
        reward_sources={"accuracy": "def accuracy(completions, **kw):\n    return [1.0]"},
    )


def test_events_are_ingested_once_however_often_they_are_sent(external):
    external_events_append(run=external, events=[batch(1), metrics(1)])
    summary = external_events_append(run=external, events=[batch(1), metrics(1), batch(2)])
    assert summary["steps"] == [1, 2]
    assert Rollout.objects.filter(run=external).count() == 8
    assert StepMetric.objects.filter(run=external).count() == 1
    external.refresh_from_db()
    # the step is the newest data's: step 2's rollouts, though its metrics have not come
    assert (external.step, external.total_steps, external.dataset_version_id) == (2, 3, None)
    row = Rollout.objects.get(run=external, step=1, index=3)
    assert (row.length, row.truncated, row.advantage, row.rewards) == (10, True, 0.5, [1.0])


def test_a_bad_event_stores_nothing(external):
    bad = batch(2)
    bad["rows"][2]["advantage"] = "high"
    with pytest.raises(EventRefused, match=r"event 2: rows\[2\]\.advantage"):
        external_events_append(run=external, events=[batch(1), bad])
    assert not Rollout.objects.filter(run=external).exists()


def test_pages_and_api_render_for_a_run_trained_elsewhere(external, owner_client):
    external_events_append(run=external, events=[batch(1), metrics(1)])
    page = owner_client.get(external.get_absolute_url())
    assert page.status_code == 200
    html = page.content.decode()
    assert "gsm8k" in html and "gpu-node-7" in html and "<script>x</script>" not in html
    assert owner_client.get(reverse("dashboard")).status_code == 200
    detail = owner_client.get(f"/api/runs/{external.pk}")
    assert detail.status_code == 200, detail.content
    assert detail.json()["dataset"] == "gsm8k" and detail.json()["origin"] == "attached"
    assert owner_client.get(f"/api/runs/{external.pk}/config.yaml").status_code == 200
    external_run_finish(run=external, failed=True, error="CUDA out of memory")
    external.refresh_from_db()
    assert (external.status, external.error, external.resumable) == ("failed", "CUDA out of memory", False)


def test_a_run_trained_elsewhere_feeds_sft_and_compares_with_the_apps_runs(
    external, owner, owner_client, dataset_version
):
    """Rejection sampling of an attached run's completions into a new SFT dataset, through the rollout browser's
    form, and the comparison page with a run the app trained."""
    from runs.models import DatasetVersion
    from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event

    external_events_append(run=external, events=[batch(1), metrics(1), batch(2), metrics(2)])
    answer = owner_client.post(reverse("run_rollouts_sft", args=[external.pk]), {"threshold": "1", "name": "kept"})
    version = DatasetVersion.objects.get(dataset__owner=owner, dataset__name="kept")
    assert answer.status_code == 302 and answer.url == version.get_absolute_url()
    kept = Rollout.objects.filter(run=external, reward__gte=1).order_by("step", "index")
    distinct = list(dict.fromkeys((k.prompt, k.completion) for k in kept))  # once per distinct pair
    assert kept.count() == 4 and version.row_count == len(distinct) == 2  # the odd rows of each batch scored 1
    rows = pd.read_parquet(version.path).to_dict("records")
    assert [(r["prompt"], r["completion"]) for r in rows] == distinct

    mine = make_run(owner, dataset_version, name="trained here")
    ingest(mine, rollouts_event(1, [("1+1?", [("2", [1.0, 1.0]), ("3", [0.0, 0.5])])]), metrics_event(1, reward=1.0))
    runs = f"{external.pk},{mine.pk}"
    compare = owner_client.get(reverse("run_compare"), {"runs": runs})
    assert compare.status_code == 200
    html = compare.content.decode()
    assert "my script" in html and "trained here" in html and "<script>x</script>" not in html
    curves = owner_client.get(reverse("run_compare_metrics"), {"runs": runs})
    assert curves.status_code == 200 and str(external.pk) in curves.content.decode()
