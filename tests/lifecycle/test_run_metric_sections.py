"""metrics.json groups the charts by TRL's prefixes (the Metrics tab's sections) and says which version of the run's
ingested data it was read from (what the live stream's open message compares)."""

import pytest

from tests.rollouts.inspect_data import ingest, make_run, metrics_event

pytestmark = pytest.mark.django_db


def test_the_charts_come_in_sections_by_prefix_with_the_data_version(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    metrics = {
        "loss": 0.1,
        "reward": 0.5,
        "rewards/accuracy/mean": 0.5,
        "completions/mean_length": 12.0,
        "val-core/accuracy": 0.25,
        "sampling/importance_sampling_ratio/mean": 1.0,
    }
    ingest(run, metrics_event(1, **metrics))
    run.event_offset, run.attempt = 4096, 2
    run.save(update_fields=["event_offset", "attempt"])
    m = owner_client.get(f"/runs/{run.pk}/metrics.json").json()
    assert m["sections"] == [
        {"name": "train", "charts": ["reward", "loss"]},
        {"name": "rewards", "charts": ["rewards/accuracy/mean"]},
        {"name": "completions", "charts": ["completions/mean_length"]},
        {"name": "eval", "charts": ["val-core/accuracy"]},
        {"name": "other", "charts": ["sampling/importance_sampling_ratio/mean"]},
    ]
    assert sorted(sum((s["charts"] for s in m["sections"]), [])) == sorted(m["charts"])
    assert m["version"] == "2.4096"
