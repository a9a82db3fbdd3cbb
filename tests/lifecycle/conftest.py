"""What the run-lifecycle tests share."""

import pytest

from runs.models import Evaluation, Run, StepMetric
from tests.rollouts.inspect_data import make_run


@pytest.fixture
def runs(owner, dataset_version):
    """Three runs for the dashboard: alpha (completed, rewards rising to 0.7, a mean@k), beta (failed), gamma (queued,
    nothing logged)."""
    made = {}
    for name, rewards, status in (
        ("alpha", [0.1, 0.3, 0.7], Run.Status.COMPLETED),
        ("beta", [0.5, 0.2], Run.Status.FAILED),
        ("gamma", [], Run.Status.QUEUED),
    ):
        run = make_run(owner, dataset_version, name=name, status=status)
        for step, value in enumerate(rewards, start=1):
            StepMetric.objects.create(run=run, step=step, metrics={"reward": value})
        run.step = len(rewards)
        run.save(update_fields=["step"])
        made[name] = run
    Evaluation.objects.create(
        run=made["alpha"],
        kind=Evaluation.Kind.STANDALONE,
        label="final",
        model="tiny",
        dataset_version=dataset_version,
        status=Evaluation.Status.COMPLETED,
        metrics={"mean@k": 0.625},
    )
    return made
