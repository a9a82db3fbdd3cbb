"""The Log tab's metric table heads each column (a logged metric line) with its step: the line does not print it,
the run's ingested metrics, logged from the same values, do (issue 28, item 13)."""

import pytest
from django.urls import reverse

from runs.lifecycle.selectors import log_view
from runs.models import StepMetric
from tests.rollouts.inspect_data import make_run

# as transformers' ProgressCallback prints them: floats as text, 4 significant digits
TAIL = """{'loss': '0.0123', 'grad_norm': '0.5', 'reward': '0.25', 'epoch': '0.1'}
  7%|▋         | 2/30 [00:02<00:30, 1.0it/s]
{'loss': '0.011', 'grad_norm': '0.4', 'reward': '0.5', 'epoch': '0.2'}
{'loss': '0.5', 'note': 'from some other program'}
{'train_runtime': '12.5', 'train_loss': '0.01', 'epoch': '0.2'}
"""
LOGGED = {
    2: {"loss": 0.012301, "grad_norm": 0.5, "reward": 0.25, "epoch": 0.1},
    4: {"loss": 0.011, "grad_norm": 0.4, "reward": 0.5, "epoch": 0.2, "train_runtime": 12.5, "train_loss": 0.01},
    6: {"loss": 0.011, "grad_norm": 0.4, "reward": 0.5, "epoch": 0.3},  # not the line's epoch
}


def test_each_logged_line_gets_the_step_whose_metrics_hold_its_values():
    view = log_view(TAIL, LOGGED.items())
    assert view["logged"] == 4
    assert view["steps"] == [2, 4, None, 4]


@pytest.mark.django_db
def test_the_progress_json_gives_the_log_tables_steps(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    for step, metrics in LOGGED.items():
        StepMetric.objects.create(run=run, step=step, metrics=metrics)
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / "train.log").write_text(TAIL)
    log = owner_client.get(reverse("run_progress_json", args=[run.pk])).json()["log"]
    assert log["steps"] == [2, 4, None, 4]
    assert log["metrics"][0] == ["loss", ["0.0123", "0.011", "0.5", None]]
