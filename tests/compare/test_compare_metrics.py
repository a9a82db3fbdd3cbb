"""The comparison's curves: one series per run, smoothed as TensorBoard smooths, by step or by wall time."""

from datetime import timedelta

import pytest
from django.urls import reverse

from runs.models import Run, StepMetric
from runs.rollouts.selectors import smooth_ema
from tests.compare.compare_data import T0, add_group, log_metrics, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(owner, dataset_version):
    a = make_run(owner, dataset_version, "a")
    log_metrics(
        a,
        {
            "reward": [0.1, 0.2, 0.4],
            "rewards/accuracy/mean": [0.0, 0.5, 1.0],
            "kl": [0.0, 0.01, 0.02],
            "loss": [0.3, 0.2, 0.1],
        },
    )
    b = make_run(owner, dataset_version, "b", rewards=("digit_ratio",), started_at=T0 + timedelta(hours=1))
    log_metrics(b, {"reward": [0.5, 0.7], "rewards/digit_ratio/mean": [0.5, 0.7]}, first=2.0, every=2.0)
    return a, b


def curves(client, runs, **params):
    query = {"runs": ",".join(str(r.pk) for r in runs), "smooth": "0", **params}
    response = client.get(reverse("run_compare_metrics"), query)
    assert response.status_code == 200, response.content
    return response.json()


def test_it_overlays_one_series_per_run_in_the_order_of_the_url(owner_client, runs):
    a, b = runs
    data = curves(owner_client, [b, a], metric="reward")
    assert [(r["id"], r["name"]) for r in data["runs"]] == [(b.pk, "b"), (a.pk, "a")]
    assert data["runs"][0]["x"] == [1, 2] and data["runs"][0]["y"] == [0.5, 0.7]
    assert data["runs"][1]["x"] == [1, 2, 3] and data["runs"][1]["y"] == [0.1, 0.2, 0.4]
    assert data["runs"][1]["smoothed"] == [0.1, 0.2, 0.4]  # smoothing 0 leaves the values as logged
    assert data["metric"] == "reward" and data["x"] == "step"


def test_smoothing_is_a_debiased_exponential_moving_average(owner_client, runs):
    a, _ = runs
    data = curves(owner_client, runs, metric="rewards/accuracy/mean", smooth="0.6")
    # y = 0, 0.5, 1 with w = 0.6: s_n = 0.4 * sum(0.6^(n-i) y_i) / (1 - 0.6^n)
    assert data["smooth"] == 0.6
    assert data["runs"][0]["y"] == [0.0, 0.5, 1.0]
    assert data["runs"][0]["smoothed"] == pytest.approx([0.0, 0.2 / 0.64, (0.12 + 0.4) / 0.784])
    assert smooth_ema([3.0, 3.0, 3.0], 0.9) == pytest.approx([3.0, 3.0, 3.0])  # no pull toward zero
    assert smooth_ema([1.0, None, 3.0], 0.5) == pytest.approx([1.0, None, (0.25 + 1.5) / 0.75])


def test_wall_time_counts_seconds_from_each_runs_start(owner_client, runs):
    data = curves(owner_client, runs, metric="reward", x="time")
    assert data["x"] == "time" and "seconds" in data["x_title"]
    assert data["runs"][0]["x"] == [5.0, 15.0, 25.0]
    assert data["runs"][1]["x"] == [2.0, 4.0]  # started an hour later: overlaid from its own start
    assert data["runs"][1]["y"] == [0.5, 0.7]


def test_wall_time_without_a_recorded_start_counts_from_the_first_logged_step(
    owner_client, owner, dataset_version, runs
):
    c = make_run(owner, dataset_version, "c", started_at=None)
    for step, seconds in ((1, 0), (2, 7.5), (3, 30)):
        StepMetric.objects.create(
            run=c, step=step, metrics={"reward": step / 10}, logged_at=T0 + timedelta(seconds=100 + seconds)
        )
    StepMetric.objects.create(run=c, step=4, metrics={"reward": 0.4}, logged_at=None)  # no time: not on a time axis
    data = curves(owner_client, [runs[0], c], metric="reward", x="time")
    assert data["runs"][1]["x"] == [0.0, 7.5, 30.0]
    assert data["runs"][1]["y"] == [0.1, 0.2, 0.3]


def test_each_reward_functions_mean_is_drawn_for_the_runs_that_have_it(owner_client, runs):
    data = curves(owner_client, runs, metric="rewards/digit_ratio/mean")
    assert data["runs"][0]["x"] == [] and data["runs"][0]["y"] == []
    assert data["runs"][1]["y"] == [0.5, 0.7]


def test_the_metrics_offered_put_the_usual_ones_first_then_whatever_else_was_logged(owner_client, runs):
    data = curves(owner_client, runs, metric="reward")
    assert data["available"] == [
        "reward",
        "rewards/accuracy/mean",
        "rewards/digit_ratio/mean",
        "kl",
        "entropy",
        "completions/mean_length",
        "reflection_rate",
        "loss",
    ]


def test_reflection_rate_is_the_share_of_a_steps_completions_with_a_reflection_phrase(owner_client, runs):
    a, b = runs
    add_group(a, 1, "p", [[0, 0]] * 4, reflections=[["wait"], [], [], []])
    add_group(a, 2, "p", [[0, 0]] * 4, reflections=[["wait"], ["hmm", "actually"], [], []])
    add_group(a, 2, "q", [[0, 0]] * 4)  # a second group of the same step counts too: 2 of 8
    add_group(b, 1, "p", [[0]] * 2, reflections=[["verify"], ["wait"]])
    data = curves(owner_client, runs, metric="reflection_rate")
    assert data["runs"][0]["x"] == [1, 2] and data["runs"][0]["y"] == [0.25, 0.25]
    assert data["runs"][1]["x"] == [1] and data["runs"][1]["y"] == [1.0]
    timed = curves(owner_client, runs, metric="reflection_rate", x="time")
    assert timed["runs"][0]["x"] == [5.0, 15.0]  # the time the step's metrics were logged


def test_values_that_are_not_numbers_are_left_out(owner_client, owner, dataset_version, runs):
    c = make_run(owner, dataset_version, "c")
    log_metrics(c, {"kl": [0.1, None, "n/a", 0.4]})
    data = curves(owner_client, [runs[0], c], metric="kl")
    assert data["runs"][1]["x"] == [1, 4] and data["runs"][1]["y"] == [0.1, 0.4]


def test_a_run_still_training_compares_as_far_as_it_has_got(owner_client, owner, dataset_version, runs):
    live = make_run(owner, dataset_version, "live", status=Run.Status.RUNNING)
    log_metrics(live, {"reward": [0.2, 0.3]})
    first = curves(owner_client, [runs[0], live], metric="reward")["runs"][1]
    assert first["status"] == "running" and not first["finished"] and first["y"] == [0.2, 0.3]
    StepMetric.objects.create(run=live, step=3, metrics={"reward": 0.9}, logged_at=T0 + timedelta(seconds=25))
    assert curves(owner_client, [runs[0], live], metric="reward")["runs"][1]["y"] == [0.2, 0.3, 0.9]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"smooth": "1"}, "smooth"),
        ({"smooth": "-0.1"}, "smooth"),
        ({"smooth": "lots"}, "smooth"),
        ({"smooth": "nan"}, "smooth"),
        ({"x": "wall"}, "x:"),
    ],
)
def test_a_bad_parameter_is_refused_naming_it(owner_client, runs, params, message):
    query = {"runs": f"{runs[0].pk},{runs[1].pk}", **params}
    response = owner_client.get(reverse("run_compare_metrics"), query)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


@pytest.mark.parametrize("count", [1, 7])
def test_it_compares_two_to_six_runs(owner_client, owner, dataset_version, count):
    ids = [make_run(owner, dataset_version, f"r{i}").pk for i in range(count)]
    response = owner_client.get(reverse("run_compare_metrics"), {"runs": ",".join(map(str, ids))})
    assert response.status_code == 400
    assert "pick 2 to 6 runs" in response.json()["error"]
