"""The run page reads at a glance: TRL's logged metric dicts in the log tail as a table, curves with TensorBoard's
smoothing."""

import pytest
from django.urls import reverse

from runs.lifecycle.selectors import log_view
from runs.models import StepMetric
from tests.rollouts.inspect_data import make_run

TAIL = (
    """loading the model
{'loss': 0.0123, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'reward': 0.25, 'epoch': 0.1}
  0%|          | 1/30 [00:01<00:30, 1.0it/s]
{'loss': 0.011, 'grad_norm': 0.4, 'learning_rate': 9e-06, 'reward': 0.5, 'epoch': 0.2}
{'not': __import__('os').system('echo pwned')}
{'deep': """
    + "[" * 5000
    + "]" * 5000
    + """}
"""
)


def test_logged_metric_dicts_become_a_table_and_the_rest_stays_text():
    view = log_view(TAIL)
    assert view["logged"] == 2
    assert view["metrics"] == [
        ["loss", [0.0123, 0.011]],
        ["grad_norm", [0.5, 0.4]],
        ["learning_rate", [1e-05, 9e-06]],
        ["reward", [0.25, 0.5]],
        ["epoch", [0.1, 0.2]],
    ]
    lines = view["text"].splitlines()
    assert lines[0] == "loading the model" and "1/30" in lines[1]
    assert lines[2].startswith("{'not': __import__") and lines[3].startswith("{'deep'")  # read, never run: text


@pytest.mark.django_db
def test_the_series_json_smooths_as_tensorboard_does(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    for step, reward in enumerate([1.0, 0.0, 1.0], start=1):
        StepMetric.objects.create(run=run, step=step, metrics={"reward": reward})
    url = reverse("run_series_json", args=[run.pk])
    assert "smoothed" not in owner_client.get(url, {"metric": "reward"}).json()
    smoothed = owner_client.get(url, {"metric": "reward", "smooth": "0.5"}).json()["smoothed"]
    assert smoothed == pytest.approx([0.5 / 0.5, 0.25 / 0.75, 0.625 / 0.875])  # debiased: no pull toward 0
    for bad in ("1", "-0.1", "nan", "x"):
        response = owner_client.get(url, {"metric": "reward", "smooth": bad})
        assert response.status_code == 400 and "smooth" in response.json()["errors"]
