"""Every model of the runs app, one module per capability (runs/models/<capability>.py), one Django app and
one app label. Import them from here: ``from runs.models import Run``."""

from runs.models.accounts import ApiToken, DatasetShare, RunShare
from runs.models.datasets import Dataset, DatasetImport, DatasetVersion
from runs.models.evaluations import EvalSample, Evaluation
from runs.models.imports import RunImport
from runs.models.jobs import Job, JobStatus
from runs.models.lifecycle import Run
from runs.models.recipes import Recipe
from runs.models.review import BUILT_IN_LABELS, AlertVerdict, Label, Review, ReviewItem
from runs.models.rollouts import Replay, ReplayRow, Rollout, RunPrompt, StepMetric, reward_bucket
from runs.models.sampling import RejectionJob, RejectionSample
from runs.models.telemetry import ResourceSample
from runs.models.workers import Worker

__all__ = [
    "Job",
    "JobStatus",
    "Dataset",
    "DatasetVersion",
    "DatasetImport",
    "Run",
    "StepMetric",
    "reward_bucket",
    "Rollout",
    "RunPrompt",
    "Replay",
    "ReplayRow",
    "Evaluation",
    "EvalSample",
    "ResourceSample",
    "Worker",
    "DatasetShare",
    "RunShare",
    "ApiToken",
    "RejectionJob",
    "RejectionSample",
    "Recipe",
    "RunImport",
    "Label",
    "BUILT_IN_LABELS",
    "Review",
    "ReviewItem",
    "AlertVerdict",
]
