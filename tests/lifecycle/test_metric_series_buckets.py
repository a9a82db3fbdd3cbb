"""series.json buckets a metric in the database (min, max and last value per bucket, as W&B draws it): a run of
5,000 steps comes back in at most the buckets asked for, a one-step spike still shows as its bucket's max, and a
range no wider than the bucket count comes back a point a step. On SQLite and on PostgreSQL alike (the CI runs this
file against both)."""

import pytest
from django.urls import reverse

from runs.models import StepMetric
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db

STEPS = 5_000
SPIKE = 3_456  # the one step whose loss jumps


def loss(step: int) -> float:
    return 1000.0 if step == SPIKE else 1.0 + (step % 7) * 0.01


@pytest.fixture
def long_run(owner, dataset_version):
    run = make_run(owner, dataset_version)
    StepMetric.objects.bulk_create(
        [
            StepMetric(
                run=run,
                step=s,
                metrics={"loss": loss(s), "label": "x", **({"val-core/acc": 0.5} if s % 1000 == 0 else {})},
            )
            for s in range(1, STEPS + 1)
        ],
        batch_size=2500,
    )
    return run


def series(client, run, **params):
    response = client.get(reverse("run_series_json", args=[run.pk]), params)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_one_step_spike_shows_in_its_buckets_max(owner_client, long_run):
    s = series(owner_client, long_run, metric="loss", buckets=250)
    assert len(s["step"]) == 250 and not s["exact"] and s["width"] == 20
    assert (s["from"], s["to"]) == (1, STEPS)
    spiked = [i for i, hi in enumerate(s["max"]) if hi > 2]
    assert len(spiked) == 1
    i = spiked[0]
    assert s["max"][i] == 1000.0 and s["min"][i] == pytest.approx(1.0)
    # the bucket's last value is the value at its last step, which is not the spike
    assert s["step"][i] == 3_460 and s["last"][i] == pytest.approx(loss(3_460))
    assert all(lo <= last <= hi for lo, last, hi in zip(s["min"], s["last"], s["max"]))
    assert s["step"] == sorted(s["step"]) and s["step"][-1] == STEPS


def test_a_narrow_range_comes_back_exact(owner_client, long_run):
    s = series(owner_client, long_run, metric="loss", **{"from": SPIKE - 50, "to": SPIKE + 49, "buckets": 1000})
    assert s["exact"] and s["step"] == list(range(SPIKE - 50, SPIKE + 50))
    assert s["last"] == pytest.approx([loss(step) for step in s["step"]])
    assert s["min"] == s["last"] == s["max"]


def test_a_sparse_metric_and_text_values(owner_client, long_run):
    s = series(owner_client, long_run, metric="val-core/acc")
    assert s["step"] == [1000, 2000, 3000, 4000, 5000] and s["last"] == [0.5] * 5 and s["exact"]
    assert series(owner_client, long_run, metric="label")["step"] == []  # text is no value
    assert series(owner_client, long_run, metric="missing")["step"] == []


def test_the_catalog_ships_no_series(owner_client, long_run):
    m = owner_client.get(reverse("run_metrics_json", args=[long_run.pk])).json()
    assert m["charts"] == ["loss", "val-core/acc"] and "series" not in m
    assert m["steps"] == {"first": 1, "last": STEPS, "count": STEPS}


@pytest.mark.parametrize(
    "params,key",
    [
        ({}, "metric"),
        ({"metric": "loss", "from": "x"}, "from"),
        ({"metric": "loss", "to": "-1"}, "to"),
        ({"metric": "loss", "buckets": "0"}, "buckets"),
        ({"metric": "loss", "buckets": "100000"}, "buckets"),
        ({"metric": "loss", "buckets": "9" * 40}, "buckets"),
        ({"metric": "l" * 201}, "metric"),
    ],
)
def test_bad_parameters_get_a_400_naming_them(owner_client, owner, dataset_version, params, key):
    run = make_run(owner, dataset_version)
    response = owner_client.get(reverse("run_series_json", args=[run.pk]), params)
    assert response.status_code == 400 and key in response.json()["errors"]


def test_an_outsider_gets_404(outsider_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    assert outsider_client.get(reverse("run_series_json", args=[run.pk]), {"metric": "loss"}).status_code == 404
