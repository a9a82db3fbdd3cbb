"""Writes of the datasets capability: import a file or a Hugging Face dataset as a new immutable version, map a
version into a new one, write a version's split as the training program reads it."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from grpo_web import queues
from runs.datasets.importing import DatasetError, ImportOptions, ImportResult, hub_offline, save_stream
from runs.datasets.isolated import ParseLimits, import_file_isolated, import_hf_isolated
from runs.datasets.mapping import Mapping, check_mapping, default_mapping, write_training_jsonl
from runs.models import Dataset, DatasetImport, DatasetVersion


def datasets_dir() -> Path:
    path = settings.DATA_DIR / "datasets"
    path.mkdir(parents=True, exist_ok=True)
    return path


def hf_import_root() -> Path:
    """The first of the server folders a user may import from by path (GRPO_IMPORT_ROOTS)."""
    return settings.GRPO_IMPORT_ROOTS[0]


def import_folders() -> list[tuple[Path, bool]]:
    """The import folders (GRPO_IMPORT_ROOTS) and whether each exists, the first made if missing: the folder a
    relative Local path names, and where the import form tells people to put what they import."""
    try:
        hf_import_root().mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # a configured folder this process may not make: the page says it is missing
    return [(root, root.is_dir()) for root in settings.GRPO_IMPORT_ROOTS]


def local_source(local_path: str) -> Path:
    """A path a user asked to import: absolute, or relative to the first import root; it must lie under one of the
    import roots (GRPO_IMPORT_ROOTS) and exist. DatasetError otherwise, naming the roots."""
    roots = [root.resolve() for root in settings.GRPO_IMPORT_ROOTS]
    path = Path(local_path)
    local = (path if path.is_absolute() else roots[0] / path).resolve()
    if not any(local.is_relative_to(root) for root in roots):
        raise DatasetError([f"path: only folders under {', '.join(str(r) for r in roots)} can be imported"])
    if not local.exists():
        raise DatasetError([f"path: {local_path} does not exist under {', '.join(str(r) for r in roots)}"])
    return local


def _import_options(prompt_column: str, gsm8k_column: str) -> ImportOptions:
    return ImportOptions(
        prompt_column=prompt_column or "prompt",
        gsm8k_column=gsm8k_column,
        max_bytes=settings.GRPO_MAX_UPLOAD_BYTES,
        max_columns=settings.GRPO_MAX_COLUMNS,
        max_field_bytes=settings.GRPO_MAX_FIELD_BYTES,
        max_depth=settings.GRPO_MAX_NESTING,
    )


def _parse_limits() -> ParseLimits:
    return ParseLimits(
        memory_bytes=settings.GRPO_IMPORT_MEMORY_BYTES,
        cpu_seconds=settings.GRPO_IMPORT_CPU_SECONDS,
        wall_seconds=settings.GRPO_IMPORT_WALL_SECONDS,
    )


def _import(
    convert, *, owner, name: str, source_name: str, dataset: Dataset | None, prompt_column: str
) -> DatasetVersion:
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
            return _version_create(
                dataset=dataset,
                path=str(dest),
                source_name=source_name,
                source_format=result.format,
                columns=result.columns,
                column_types=result.column_types,
                row_count=result.row_count,
                size_bytes=dest.stat().st_size,
                train_rows=result.row_count,
                **mapping.as_fields(),
            )
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


def dataset_import(
    *,
    owner,
    name: str,
    stream=None,
    path: Path | None = None,
    source_name: str = "",
    dataset: Dataset | None = None,
    prompt_column: str = "prompt",
    gsm8k_column: str = "",
    on_progress=None,
) -> DatasetVersion:
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
        return import_file_isolated(
            Path(source),
            filename=filename,
            dest=dest,
            workdir=workdir,
            options=options,
            limits=_parse_limits(),
            cwd=settings.BASE_DIR,
            on_progress=on_progress,
        )

    return _import(
        convert, owner=owner, name=name, source_name=filename, dataset=dataset, prompt_column=options.prompt_column
    )


def dataset_import_hf(
    *,
    owner,
    name: str,
    local_path: str = "",
    hub_id: str = "",
    config: str = "",
    split: str = "",
    dataset: Dataset | None = None,
    prompt_column: str = "prompt",
    gsm8k_column: str = "",
    on_progress=None,
) -> DatasetVersion:
    """Import a Hugging Face dataset: a folder under ``hf_import_root()`` (saved with ``save_to_disk``, a data
    folder, or one data file), or a hub id + config + split when the server is online. Loaded and checked in a
    child process (runs.datasets.isolated)."""
    options = _import_options(prompt_column, gsm8k_column)
    local = local_source(local_path) if local_path else None
    if local is not None:
        if local.is_file():
            return dataset_import(
                owner=owner,
                name=name,
                path=local,
                source_name=local.name,
                dataset=dataset,
                prompt_column=prompt_column,
                gsm8k_column=gsm8k_column,
                on_progress=on_progress,
            )
    source_name = local.name if local else ":".join(x for x in (hub_id, config, split) if x)

    def convert(dest: Path, workdir: Path) -> ImportResult:
        return import_hf_isolated(
            local_path=local,
            hub_id=hub_id,
            config=config,
            split=split,
            dest=dest,
            workdir=workdir,
            options=options,
            limits=_parse_limits(),
            cwd=settings.BASE_DIR,
            on_progress=on_progress,
        )

    return _import(
        convert, owner=owner, name=name, source_name=source_name, dataset=dataset, prompt_column=options.prompt_column
    )


def dataset_import_hf_start(
    *,
    owner,
    name: str,
    local_path: str = "",
    hub_id: str = "",
    config: str = "",
    split: str = "",
    dataset: Dataset | None = None,
    prompt_column: str = "prompt",
    gsm8k_column: str = "",
) -> DatasetImport:
    """Check what can be checked at once (the path is under an import root and exists; a hub id needs a server that
    may reach the hub), then queue the import for a worker (workers.tasks.dataset_import); its page follows it."""
    local = str(local_source(local_path)) if local_path else ""
    if hub_id and hub_offline():
        raise DatasetError(
            [
                f"hub id: this server runs offline (HF_HUB_OFFLINE=1) and cannot fetch '{hub_id}' from the Hugging "
                f"Face hub; put a copy in an import folder ({hf_import_root()}) and import it by Local path"
            ]
        )
    with transaction.atomic():
        job = DatasetImport.objects.create(
            owner=owner,
            dataset=dataset,
            name=name,
            source={
                "local_path": local,
                "hub_id": hub_id,
                "config": config,
                "split": split,
                "prompt_column": prompt_column,
                "gsm8k_column": gsm8k_column,
            },
            progress="waiting for a worker",
        )
        transaction.on_commit(lambda: queues.enqueue(queues.DATASET_IMPORT, args=[job.pk]))
    return job


def dataset_import_job_run(*, job_id: int) -> DatasetImport | None:
    """The worker's side of a background import: claim it, run it (in its child process), note its progress about
    every second, and record the version or the errors. None when the job is gone or not queued (a redelivery)."""
    with transaction.atomic():
        job = DatasetImport.objects.select_for_update().filter(pk=job_id, status=DatasetImport.Status.QUEUED).first()
        if job is None:
            return None
        hub_id = "" if job.source.get("local_path") else job.source.get("hub_id", "")
        job.status = DatasetImport.Status.RUNNING
        job.progress = f"asking the Hugging Face hub for {hub_id}" if hub_id else "loading"
        job.save(update_fields=["status", "progress"])

    def progress(rows: int) -> None:
        DatasetImport.objects.filter(pk=job.pk).update(rows_done=rows, progress=f"checked and wrote {rows} rows")

    source = job.source
    try:
        version = dataset_import_hf(
            owner=job.owner,
            name=job.name,
            dataset=job.dataset,
            local_path=source["local_path"],
            hub_id=source["hub_id"],
            config=source["config"],
            split=source["split"],
            prompt_column=source["prompt_column"],
            gsm8k_column=source["gsm8k_column"],
            on_progress=progress,
        )
    except DatasetError as exc:
        job.status, job.errors = DatasetImport.Status.FAILED, exc.errors
    except Exception as exc:  # a job must end with its state told, whatever went wrong
        job.status, job.errors = DatasetImport.Status.FAILED, [f"the import failed: {type(exc).__name__}: {exc}"]
    else:
        job.status, job.version, job.rows_done = DatasetImport.Status.COMPLETED, version, version.row_count
    job.progress, job.finished_at = "", timezone.now()
    job.save(update_fields=["status", "errors", "version", "rows_done", "progress", "finished_at"])
    return job


def import_choices(limit: int = 300, depth: int = 3) -> list[tuple[str, str]]:
    """What the import form offers under the import roots: folders saved with save_to_disk, data folders and data
    files, as (absolute path, shown name), at most ``limit`` of them, ``depth`` levels down."""
    data = (".jsonl", ".json", ".csv", ".parquet", ".arrow", ".jsonl.gz", ".json.gz", ".csv.gz")
    saved = ("dataset_info.json", "dataset_dict.json", "state.json")
    out: list[tuple[str, str]] = []
    for root in settings.GRPO_IMPORT_ROOTS:
        if not root.is_dir():
            continue
        frontier = [(root, 0)]
        while frontier and len(out) < limit:
            folder, level = frontier.pop(0)
            try:
                entries = sorted(folder.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or len(out) >= limit:
                    continue
                shown = f"{root.name}/{entry.relative_to(root)}"
                if entry.is_dir():
                    names = {p.name for p in entry.iterdir()} if level < depth else set()
                    if names & set(saved) or any(n.endswith(data) for n in names):
                        out.append((str(entry), shown + "/"))
                    elif level + 1 < depth:
                        frontier.append((entry, level + 1))
                elif entry.name.endswith(data):
                    out.append((str(entry), shown))
    return out


def dataset_version_map(*, version: DatasetVersion, mapping: Mapping) -> DatasetVersion:
    """Save a new mapping of a version's rows as a new version (the rows file is shared; versions never change)."""
    check = check_mapping(version.path, mapping, version.columns, version.column_types)
    if check.errors:
        raise DatasetError(check.errors)
    with transaction.atomic():
        return _version_create(
            dataset=version.dataset,
            path=version.path,
            source_name=version.source_name,
            source_format=version.source_format,
            based_on=version,
            columns=version.columns,
            column_types=version.column_types,
            row_count=version.row_count,
            size_bytes=version.size_bytes,
            train_rows=check.train_rows,
            eval_rows=check.eval_rows,
            **mapping.as_fields(),
        )


def version_training_file(
    *, version: DatasetVersion, out: Path, split: str = "train", extra_columns: tuple[str, ...] = ()
) -> str:
    """Write a split ("train", "eval" or "all") of a version as the training program reads it (``prompt`` + reward
    columns, + ``extra_columns`` the version has); return the path."""
    extra = tuple(c for c in extra_columns if c in version.columns)
    return str(write_training_jsonl(version.path, Mapping.of(version), out, split, extra))
