"""The self-reflection tracker's JSON: the share of completions with a phrase per step (and per phrase), the first
step it appears, and its correlation with reward and length, checked against numpy on the same rows."""

import numpy as np
import pytest
from django.urls import reverse

from runs.models import Rollout
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version)
    plain = [("4", [0.0, 0.2]), ("5", [0.0, 0.1]), ("6", [0.0, 0.3]), ("7", [0.0, 0.0])]
    ingest(run, rollouts_event(1, [("What is 2 + 2?", plain)], lengths=[10, 12, 14, 16]))
    ingest(
        run, rollouts_event(2, [("What is 2 + 2?", [("Wait, 4.", [1.0, 0.5]), *plain[1:]])], lengths=[30, 12, 14, 16])
    )
    ingest(
        run,
        rollouts_event(
            3,
            [
                (
                    "What is 2 + 2?",
                    [
                        ("Wait, let me check: 4.", [1.0, 0.9]),
                        ("Hmm, 4.", [1.0, 0.4]),
                        ("5", [0.0, 0.1]),
                        ("Actually 4.", [1.0, 0.0]),
                    ],
                )
            ],
            lengths=[40, 35, 12, 30],
        ),
    )
    return run


def tracker(client, run):
    response = client.get(reverse("run_reflection_json", args=[run.pk]))
    assert response.status_code == 200
    return response.json()


def test_the_share_per_step_and_the_first_step(owner_client, run):
    d = tracker(owner_client, run)
    assert d["steps"] == [1, 2, 3]
    assert d["share"] == [0.0, 0.25, 0.75]
    assert d["first_step"] == 2
    assert d["per_phrase"]["wait"] == [0.0, 0.25, 0.25]
    assert d["per_phrase"]["let me check"] == [0.0, 0.0, 0.25]
    assert d["first_step_per_phrase"]["hmm"] == 3
    assert d["first_step_per_phrase"]["verify"] is None
    assert d["completions"] == 12 and d["reflective"] == 4


def test_means_with_and_without_a_phrase(owner_client, run):
    d = tracker(owner_client, run)
    assert d["reward_with"] == [None, pytest.approx(1.5), pytest.approx((1.9 + 1.4 + 1.0) / 3)]
    assert d["reward_without"][1] == pytest.approx((0.1 + 0.3 + 0.0) / 3)
    assert d["length_with"] == [None, 30, pytest.approx(35)]


def test_correlations_agree_with_numpy(owner_client, run):
    d = tracker(owner_client, run)
    rows = list(Rollout.objects.filter(run=run).values("step", "reward", "length", "reflective"))
    x = np.array([r["reflective"] for r in rows], dtype=float)
    assert d["correlation"]["reward"] == pytest.approx(np.corrcoef(x, [r["reward"] for r in rows])[0, 1])
    assert d["correlation"]["length"] == pytest.approx(np.corrcoef(x, [r["length"] for r in rows])[0, 1])

    def within(values):
        xs, ys = [], []
        for step in (1, 2, 3):
            idx = [i for i, r in enumerate(rows) if r["step"] == step]
            xs += list(x[idx] - x[idx].mean())
            v = np.array([values[i] for i in idx], dtype=float)
            ys += list(v - v.mean())
        return np.corrcoef(xs, ys)[0, 1]

    assert d["correlation"]["reward_within_step"] == pytest.approx(within([r["reward"] for r in rows]))
    assert d["correlation"]["length_within_step"] == pytest.approx(within([r["length"] for r in rows]))


def test_a_run_without_reflection_has_no_correlation(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version, name="plain")
    ingest(run, rollouts_event(1, [("What is 2 + 2?", [("4", [1.0, 0.0]), ("5", [0.0, 0.0])])]))
    d = tracker(owner_client, run)
    assert d["first_step"] is None
    assert d["correlation"]["reward"] is None and d["correlation"]["reward_within_step"] is None


def test_the_tracker_page_shows_the_list_for_editing(owner_client, run):
    html = owner_client.get(reverse("run_reflection", args=[run.pk])).content.decode()
    assert "let me reconsider\nlet me re-examine" in html
    assert 'id="chart-share"' in html
