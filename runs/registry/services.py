"""Writes of the model registry: a model folder exported (copied) into the exports folder."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings

from runs.registry.selectors import ModelEntry, archive_files


def model_export(*, entry: ModelEntry, user) -> Path:
    """Copy the model's loadable files (weights, config, tokenizer) to GRPO_EXPORT_DIR/<user>/<run id>-<key>/ and
    return the folder; an earlier export of the same model is replaced."""
    dest = Path(settings.GRPO_EXPORT_DIR) / user.username / f"run-{entry.run.pk}-{entry.key}"
    partial = dest.with_name(dest.name + ".part")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for path in archive_files(entry):
        shutil.copy2(path, partial / path.name)
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return dest
