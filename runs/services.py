"""Writes. Keyword-only functions named <entity>_<action>."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from runs.datasets import DatasetError, iter_jsonl_rows
from runs.models import Dataset, DatasetVersion, Run
from workers.config import GRPOFields, RewardSpec, TrainConfig


def _datasets_dir() -> Path:
    path = settings.DATA_DIR / "datasets"
    path.mkdir(parents=True, exist_ok=True)
    return path


@transaction.atomic
def dataset_import(*, owner, name: str, stream, source_name: str = "", dataset: Dataset | None = None) -> DatasetVersion:
    """Validate a JSON-lines upload and store it as a new immutable version. On any error nothing is saved."""
    columns: dict[str, None] = {}
    count = 0
    fd, tmp = tempfile.mkstemp(dir=_datasets_dir(), suffix=".part")
    final = None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for row in iter_jsonl_rows(stream):
                for key in row:
                    columns.setdefault(key, None)
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
        if dataset is None:
            dataset = Dataset.objects.create(owner=owner, name=name)
        number = (dataset.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        final = _datasets_dir() / f"{uuid.uuid4().hex}.jsonl"  # unique across databases sharing a data folder
        os.replace(tmp, final)
        return DatasetVersion.objects.create(
            dataset=dataset, number=number, path=str(final), source_name=source_name,
            columns=list(columns), row_count=count,
        )
    except BaseException:
        # nothing half-saved: the rows roll back with the transaction, the file goes here
        Path(tmp).unlink(missing_ok=True)
        if final is not None:
            final.unlink(missing_ok=True)
        raise


def run_create(*, owner, name: str, model: str, dataset_version: DatasetVersion, rewards: list[dict],
               config: dict) -> Run:
    """Validate and queue a run; the training task is sent once the row is committed."""
    spec = TrainConfig(model=model, dataset_path=dataset_version.path, output_dir="", event_log="",
                       rewards=[RewardSpec(**r) for r in rewards], grpo=GRPOFields(**config))
    errors = spec.validate()
    if errors:
        raise DatasetError(errors)  # same shape: a list of messages naming the field
    with transaction.atomic():
        run = Run.objects.create(owner=owner, name=name, model=model, dataset_version=dataset_version,
                                 rewards=rewards, config=config, total_steps=config["max_steps"])
        transaction.on_commit(lambda: _enqueue(run.pk))
    return run


def _enqueue(run_id: int) -> None:
    from grpo_web.embedded import ensure_configured_redis
    from workers.tasks import train_run

    ensure_configured_redis()
    train_run.delay(run_id)
