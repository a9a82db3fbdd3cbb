"""Zero-variance groups per step, split into all right (too easy) and all wrong (too hard) by the run's solve
criterion, as the run page's Metrics tab draws them."""

import pytest
from django.urls import reverse

from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db


def test_zero_variance_groups_split_into_all_right_and_all_wrong(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)  # accuracy and digit_ratio: accuracy >= 1 solves
    right, wrong = [("4", [1.0, 1.0])] * 4, [("x", [0.0, 0.0])] * 4
    mixed = [("4", [1.0, 1.0]), ("5", [0.0, 1.0]), ("4", [1.0, 0.5]), ("x", [0.0, 0.0])]
    ingest(
        run,
        rollouts_event(1, [("a", right), ("b", wrong), ("c", mixed), ("d", wrong)]),
        rollouts_event(2, [("a", right), ("b", right), ("c", mixed), ("d", mixed)]),
    )
    data = owner_client.get(reverse("run_zero_variance_json", args=[run.pk])).json()
    assert data["steps"] == [1, 2]
    assert data["all_right"] == [0.25, 0.5] and data["all_wrong"] == [0.5, 0.0] and data["other"] == [0.0, 0.0]
    assert data["criterion"]["solved_by"] == "accuracy"


def test_an_outsider_gets_404(outsider_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    assert outsider_client.get(reverse("run_zero_variance_json", args=[run.pk])).status_code == 404
