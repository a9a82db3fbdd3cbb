"""The comparison's curves by step are bucketed on the server, five runs at once: at most the buckets asked for a
run, a one-step spike in one run's bucket max, exact points once the range is short, and bad bounds a 400."""

import pytest
from django.urls import reverse

from runs.models import StepMetric
from tests.compare.compare_data import make_run

pytestmark = pytest.mark.django_db

STEPS = 3_000
SPIKE = 1_234


@pytest.fixture
def five(owner, dataset_version):
    runs = [make_run(owner, dataset_version, f"run {i}") for i in range(5)]
    StepMetric.objects.bulk_create(
        StepMetric(run=run, step=s, metrics={"reward": 9.0 if (i == 2 and s == SPIKE) else 0.1 * i})
        for i, run in enumerate(runs)
        for s in range(1, STEPS + 1)
    )
    return runs


def curves(client, runs, **params):
    query = {"runs": ",".join(str(r.pk) for r in runs), "smooth": "0", "metric": "reward", **params}
    return client.get(reverse("run_compare_metrics"), query)


def test_five_runs_come_bucketed_with_the_spike_in_its_max(owner_client, five):
    m = curves(owner_client, five, buckets=300).json()
    assert (m["from"], m["to"]) == (1, STEPS) and [len(c["x"]) for c in m["runs"]] == [300] * 5
    spiked = m["runs"][2]
    assert max(spiked["max"]) == 9.0 and 9.0 not in spiked["y"] and not spiked["exact"]
    assert all(max(c["max"]) < 1 for i, c in enumerate(m["runs"]) if i != 2)

    narrow = curves(owner_client, five, **{"from": SPIKE - 5, "to": SPIKE + 4}).json()
    assert narrow["runs"][2]["x"] == list(range(SPIKE - 5, SPIKE + 5)) and narrow["runs"][2]["exact"]
    assert narrow["runs"][2]["y"][5] == 9.0


@pytest.mark.parametrize("params", [{"from": "x"}, {"to": "-3"}, {"buckets": "0"}, {"buckets": "5000"}])
def test_bad_bounds_are_a_400_naming_them(owner_client, five, params):
    response = curves(owner_client, five[:2], **params)
    assert response.status_code == 400 and next(iter(params)) in response.json()["error"]
