"""Demo content for a fresh install: a user, and the locally generated demo datasets."""

from __future__ import annotations

import io
import json

from django.contrib.auth import get_user_model

from runs.models import Dataset, DatasetVersion
from runs.services import dataset_import
from workers.demo_data import arithmetic_rows

DEMO_DATASETS = {"arithmetic (demo)": lambda: arithmetic_rows(200, seed=0)}


def demo_load(*, username: str = "demo", password: str) -> tuple[object, list[DatasetVersion]]:
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    if created or not user.check_password(password):
        user.set_password(password)
        user.save(update_fields=["password"])
    versions = []
    for name, rows in DEMO_DATASETS.items():
        dataset = Dataset.objects.filter(owner=user, name=name).first()
        if dataset and dataset.latest_version:
            versions.append(dataset.latest_version)
            continue
        data = "".join(json.dumps(r) + "\n" for r in rows()).encode()
        versions.append(dataset_import(owner=user, name=name, stream=io.BytesIO(data), source_name="generated"))
    return user, versions
