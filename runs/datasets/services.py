"""Writes of the datasets capability: import a file or a Hugging Face dataset as a new immutable version, map a
version into a new one, write a version's split as the training program reads it."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from runs.datasets.importing import DatasetError, ImportOptions, ImportResult, save_stream
from runs.datasets.isolated import ParseLimits, import_file_isolated, import_hf_isolated
from runs.datasets.mapping import Mapping, check_mapping, default_mapping, write_training_jsonl
from runs.models import Dataset, DatasetVersion


def datasets_dir() -> Path:
    path = settings.DATA_DIR / "datasets"
    path.mkdir(parents=True, exist_ok=True)
    return path


def hf_import_root() -> Path:
    """Server folders a user may import from by path: only under here, never the rest of the machine."""
    return settings.DATA_DIR / "imports"


def _import_options(prompt_column: str, gsm8k_column: str) -> ImportOptions:
    return ImportOptions(prompt_column=prompt_column or "prompt", gsm8k_column=gsm8k_column,
                         max_bytes=settings.GRPO_MAX_UPLOAD_BYTES, max_columns=settings.GRPO_MAX_COLUMNS,
                         max_field_bytes=settings.GRPO_MAX_FIELD_BYTES, max_depth=settings.GRPO_MAX_NESTING)


def _parse_limits() -> ParseLimits:
    return ParseLimits(memory_bytes=settings.GRPO_IMPORT_MEMORY_BYTES, cpu_seconds=settings.GRPO_IMPORT_CPU_SECONDS,
                       wall_seconds=settings.GRPO_IMPORT_WALL_SECONDS)


def _import(convert, *, owner, name: str, source_name: str, dataset: Dataset | None,
            prompt_column: str) -> DatasetVersion:
    """Run ``convert(dest, workdir) -> ImportResult`` outside any transaction, then record the version.

    On any error nothing is saved: no rows (the transaction rolls back), no files (removed here)."""
    folder = datasets_dir()
    dest = folder / f"{uuid.uuid4().hex}.parquet"  # unique across databases sharing a data folder
    try:
        with tempfile.TemporaryDirectory(dir=folder, prefix=".import-") as workdir:
            result: ImportResult = convert(dest, Path(workdir))
        mapping = default_mapping(prompt_column or "prompt", result.columns, result.column_types)
        with transaction.atomic():
            if dataset is None:
                dataset = Dataset.objects.create(owner=owner, name=name)
            return _version_create(dataset=dataset, path=str(dest), source_name=source_name,
                                   source_format=result.format, columns=result.columns,
                                   column_types=result.column_types, row_count=result.row_count,
                                   size_bytes=dest.stat().st_size, train_rows=result.row_count,
                                   **mapping.as_fields())
    except BaseException:
        dest.unlink(missing_ok=True)
        raise


def _version_create(*, dataset: Dataset, **fields) -> DatasetVersion:
    Dataset.objects.select_for_update().filter(pk=dataset.pk).first()  # one number per version, even when racing
    number = (dataset.versions.aggregate(n=Max("number"))["n"] or 0) + 1
    return DatasetVersion.objects.create(dataset=dataset, number=number, **fields)


def _display_name(name: str) -> str:
    """An uploader's file name as shown and stored: its last path part, no control characters, at most 200
    characters (the extension kept). It never names a place on disk: stored files are named by uuid."""
    name = "".join(c for c in name.replace("\\", "/").rsplit("/", 1)[-1] if c.isprintable())
    if len(name) > 200:
        stem, dot, ext = name.rpartition(".")
        name = stem[:190] + dot + ext[-9:] if dot and len(ext) < 10 else name[:200]
    return name


def dataset_import(*, owner, name: str, stream=None, path: Path | None = None, source_name: str = "",
                   dataset: Dataset | None = None, prompt_column: str = "prompt",
                   gsm8k_column: str = "") -> DatasetVersion:
    """Validate an uploaded file (JSON lines, JSON, CSV or Parquet; .gz or .zip) and store it as a new version.

    The format comes from ``source_name``'s extension and is checked against the file's first bytes. Give the file
    as ``stream`` (an upload; copied to disk in chunks unless Django already wrote it there) or as ``path``."""
    options = _import_options(prompt_column, gsm8k_column)
    filename = _display_name(source_name) or (path.name if path else "upload")

    def convert(dest: Path, workdir: Path) -> ImportResult:
        source = path
        if source is None:
            on_disk = getattr(stream, "temporary_file_path", None)
            source = Path(on_disk()) if on_disk else save_stream(stream, workdir / "upload", options.max_bytes)
        return import_file_isolated(Path(source), filename=filename, dest=dest, workdir=workdir, options=options,
                                    limits=_parse_limits(), cwd=settings.BASE_DIR)

    return _import(convert, owner=owner, name=name, source_name=filename, dataset=dataset,
                   prompt_column=options.prompt_column)


def dataset_import_hf(*, owner, name: str, local_path: str = "", hub_id: str = "", config: str = "",
                      split: str = "", dataset: Dataset | None = None, prompt_column: str = "prompt",
                      gsm8k_column: str = "") -> DatasetVersion:
    """Import a Hugging Face dataset: a folder under ``hf_import_root()`` (saved with ``save_to_disk``, a data
    folder, or one data file), or a hub id + config + split when the server is online. Loaded and checked in a
    child process (runs.datasets.isolated)."""
    options = _import_options(prompt_column, gsm8k_column)
    local = None
    if local_path:
        root = hf_import_root().resolve()
        local = (root / local_path).resolve()
        if not local.is_relative_to(root):
            raise DatasetError([f"path: only folders under {root} can be imported"])
        if not local.exists():
            raise DatasetError([f"path: {local_path} does not exist under {root}"])
        if local.is_file():
            return dataset_import(owner=owner, name=name, path=local, source_name=local.name, dataset=dataset,
                                  prompt_column=prompt_column, gsm8k_column=gsm8k_column)
    source_name = local.name if local else ":".join(x for x in (hub_id, config, split) if x)

    def convert(dest: Path, workdir: Path) -> ImportResult:
        return import_hf_isolated(local_path=local, hub_id=hub_id, config=config, split=split, dest=dest,
                                  workdir=workdir, options=options, limits=_parse_limits(), cwd=settings.BASE_DIR)

    return _import(convert, owner=owner, name=name, source_name=source_name, dataset=dataset,
                   prompt_column=options.prompt_column)


def dataset_version_map(*, version: DatasetVersion, mapping: Mapping) -> DatasetVersion:
    """Save a new mapping of a version's rows as a new version (the rows file is shared; versions never change)."""
    check = check_mapping(version.path, mapping, version.columns, version.column_types)
    if check.errors:
        raise DatasetError(check.errors)
    with transaction.atomic():
        return _version_create(
            dataset=version.dataset, path=version.path, source_name=version.source_name,
            source_format=version.source_format, based_on=version, columns=version.columns,
            column_types=version.column_types, row_count=version.row_count, size_bytes=version.size_bytes,
            train_rows=check.train_rows, eval_rows=check.eval_rows, **mapping.as_fields())


def version_training_file(*, version: DatasetVersion, out: Path, split: str = "train") -> str:
    """Write a split ("train", "eval" or "all") of a version as the training program reads it (``prompt`` + reward
    columns); return the path."""
    return str(write_training_jsonl(version.path, Mapping.of(version), out, split))
