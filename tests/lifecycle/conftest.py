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


@pytest.fixture
def charted_run(owner, dataset_version):
    """A running run with three steps of rollouts and metrics under several of TRL's prefixes (none, rewards/,
    completions/, clip_ratio/), step timings, and no push since (its stream stays open)."""
    from tests.rollouts.inspect_data import ingest, metrics_event, rollouts_event

    run = make_run(owner, dataset_version, name="charted run", status=Run.Status.RUNNING, step=3)
    for step in (1, 2, 3):
        ingest(
            run,
            rollouts_event(step, [("What is 2 + 2?", [("4", [1.0, 1.0]), ("5", [0.0, 0.5])])]),
            metrics_event(
                step,
                **{
                    "reward": 0.25 * step,
                    "loss": 0.1,
                    "entropy": 1.0 - 0.1 * step,
                    "rewards/accuracy/mean": 0.5,
                    "rewards/digit_ratio/mean": 0.2 * step,
                    "completions/mean_length": 10.0 + step,
                    "clip_ratio/region_mean": 0.01,
                    "timing/step_s": 1.5,
                    "timing/generation_s": 1.0,
                },
            ),
        )
    return run
