"""Health signals on the run page, from TRL's logged metrics: entropy collapse, KL spike, high clipped ratio, many
zero-variance groups, and the near-zero loss explained."""

import pytest
from django.urls import reverse

from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event

pytestmark = pytest.mark.django_db


def health(client, run) -> dict:
    response = client.get(reverse("run_health_json", args=[run.pk]))
    assert response.status_code == 200
    return {s["key"]: s for s in response.json()["signals"]}


def logged(owner, dataset_version, series: dict, **config):
    run = make_run(owner, dataset_version, config=config)
    steps = max(len(v) for v in series.values())
    ingest(run, *[metrics_event(i + 1, **{k: v[i] for k, v in series.items()}) for i in range(steps)])
    return run


def test_a_healthy_run_says_so(owner_client, owner, dataset_version):
    run = logged(
        owner,
        dataset_version,
        {
            "entropy": [1.2, 1.1, 1.15, 1.0, 1.05],
            "completions/clipped_ratio": [0.05] * 5,
            "frac_reward_zero_std": [0.1] * 5,
            "loss": [0.2, 0.1, 0.3, 0.2, 0.1],
        },
    )
    signals = health(owner_client, run)
    assert {s["level"] for s in signals.values()} == {"ok"}
    assert "near_zero_loss" not in signals


def test_entropy_collapse(owner_client, owner, dataset_version):
    run = logged(owner, dataset_version, {"entropy": [1.2, 1.1, 1.0, 0.4, 0.1, 0.05, 0.04]})
    s = health(owner_client, run)["entropy_collapse"]
    assert s["level"] == "warn" and s["title"] == "Entropy collapse" and s["step"] == 7


def test_a_kl_spike_names_its_step(owner_client, owner, dataset_version):
    run = logged(owner, dataset_version, {"kl": [0.01, 0.012, 0.011, 0.013, 0.2, 0.014]}, beta=0.04)
    s = health(owner_client, run)["kl_spike"]
    assert s["level"] == "warn" and s["step"] == 5 and "0.2" in s["detail"]


def test_without_beta_kl_is_not_measured(owner_client, owner, dataset_version):
    run = logged(owner, dataset_version, {"entropy": [1.0] * 5}, beta=0.0)
    s = health(owner_client, run)["kl_spike"]
    assert s["level"] == "ok" and "beta=0" in s["detail"]


def test_a_high_clipped_ratio_links_to_the_truncated_completions(owner_client, owner, dataset_version):
    run = logged(owner, dataset_version, {"completions/clipped_ratio": [0.1, 0.3, 0.5, 0.6]})
    s = health(owner_client, run)["clipped_ratio"]
    assert s["level"] == "warn" and "max_completion_length=16" in s["detail"]
    assert s["url"] == reverse("run_rollouts", args=[run.pk]) + "?truncated=yes"


def test_many_zero_variance_groups_link_to_them(owner_client, owner, dataset_version):
    run = logged(owner, dataset_version, {"frac_reward_zero_std": [0.2, 0.6, 0.8, 0.9]})
    s = health(owner_client, run)["zero_std"]
    assert s["level"] == "warn" and s["detail"].startswith("77% of recent groups")
    assert s["url"] == reverse("run_rollouts", args=[run.pk]) + "?zero_std=yes"


def test_a_near_zero_loss_with_beta_zero_and_dapo_is_explained(owner_client, owner, dataset_version):
    run = logged(owner, dataset_version, {"loss": [0.0, 1e-5, -2e-5, 0.0, 1e-6]}, beta=0.0, loss_type="dapo")
    s = health(owner_client, run)["near_zero_loss"]
    assert s["level"] == "info"
    assert "beta=0.0 there is no KL term" in s["detail"] and "loss_type=dapo" in s["detail"]
    assert "policy ratio is exactly 1" in s["detail"]


def test_under_batch_scaling_zero_variance_counts_the_stored_groups_not_trls_batch_figure(
    owner_client, owner, dataset_version
):
    # TRL's frac_reward_zero_std under scale_rewards="batch" is about the batch's std (0 here: rewards differ across
    # groups), while three of the four groups gave every completion the same reward
    run = make_run(owner, dataset_version, config={"scale_rewards": "batch"})
    same, mixed = [("a", [1.0, 1.0])] * 4, [("a", [1.0, 1.0]), ("b", [0.0, 0.0])] * 2
    for step in (1, 2, 3):
        ingest(
            run,
            rollouts_event(
                step,
                [("p1", same), ("p2", [("x", [0.0, 0.0])] * 4), ("p3", same), ("p4", mixed)],
                scale_rewards="batch",
            ),
            metrics_event(step, frac_reward_zero_std=0.0),
        )
    s = health(owner_client, run)["zero_std"]
    assert s["level"] == "warn" and s["detail"].startswith("75%") and s["url"].endswith("?zero_std=yes")
