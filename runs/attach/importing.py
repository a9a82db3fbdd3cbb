"""Import a run trained elsewhere from the files its trainer wrote: TRL's completions tables, verl's rollout dumps
and validation dumps (the run's periodic evaluations), a Trackio project (runs.attach.importers converts them to
events; runs.attach.services stores them).

Server paths must lie under GRPO_IMPORT_ROOTS; uploads go to a folder of their own and are read the same way: by
the converters in a child process under limits (runs.attach.importers.isolated), which open every file without
following a link below its root and refuse hard links (runs.attach.importers.rootfs). A file that cannot be read
refuses the whole import, naming the file and the row: nothing is stored. Watch mode (``run_import_poll``, on the
default queue) follows a verl or TRL folder while the run writes it, reading only what it has not read yet: new files,
the lines appended to verl's log, a trainer state that changed; a user watches GRPO_IMPORT_WATCH_PER_USER at most.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from grpo_web import queues
from runs.attach.checks import EventRefused
from runs.attach.importers import VALIDATION, Converted, ImportFault, describe
from runs.attach.importers.isolated import Limits, convert_isolated
from runs.attach.services import external_events_append, external_run_create, external_run_finish
from runs.models import Evaluation, JobStatus, Rollout, Run, RunImport

log = logging.getLogger(__name__)

SOURCES = ("trl", "verl", "trackio")
WATCH_EVERY_S = 5  # seconds between two reads of a watched folder
SETTLE_S = 2.0  # a verl dump modified this recently may still be being written: read it next time
UPLOAD_NAMES = {".parquet": "trl", ".jsonl": "verl", ".db": "trackio"}
MAX_UPLOAD_FILES = 10_000


class ImportRefused(ValueError):
    """An import that cannot be made; the message names the file and row, or the field."""


def import_roots() -> list[Path]:
    return [Path(root).resolve() for root in settings.GRPO_IMPORT_ROOTS]


def inside_roots(path: str | Path) -> Path:
    """A path a user asked to import, resolved (symbolic links followed): it must lie under an import root and
    exist. ImportRefused otherwise, naming the path as it lies in its import folder: the server's own folders are not
    shown."""
    roots = import_roots()
    given = Path(str(path))
    if "\x00" in str(path):
        raise ImportRefused("path: not a valid path")
    resolved = (given if given.is_absolute() else roots[0] / given).resolve()
    root = next((root for root in roots if resolved.is_relative_to(root)), None)
    if root is None:
        raise ImportRefused(
            "path: only files under the import folders (GRPO_IMPORT_ROOTS) can be imported: give the path relative "
            "to the import folder"
        )
    if not resolved.exists():
        raise ImportRefused(f"path: {str(resolved.relative_to(root))[:300]!r} does not exist in the import folder")
    return resolved


def check_links(path: Path, roots: list[Path]) -> None:
    """Refuse a folder holding a link (to a file or folder) that leads out of the import roots: the converters read
    what a folder's names lead to."""
    if path.is_file():
        return
    for entry in _walk(path, depth=3):
        if entry.is_symlink() and not any(entry.resolve().is_relative_to(root) for root in roots):
            raise ImportRefused(f"{entry.relative_to(path)}: a link out of the import folders")


def _walk(folder: Path, depth: int):
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        yield entry
        if depth > 1 and entry.is_dir() and not entry.is_symlink():
            yield from _walk(entry, depth - 1)


def detect(path: Path) -> str:
    """Which trainer wrote ``path``: TRL (parquet tables), verl (``{step}.jsonl`` dumps) or Trackio (a project's
    ``.db``)."""
    if path.is_file():
        source = UPLOAD_NAMES.get(path.suffix)
        if source:
            return source
    elif (path / "completions").is_dir() or any(path.glob("*.parquet")) or any(path.glob("data/*.parquet")):
        return "trl"
    elif any(p.stem.isdigit() for p in path.glob("*.jsonl")):
        return "verl"
    elif any(path.glob("*.db")):
        return "trackio"
    elif any(p.stem.isdigit() for p in path.glob("*/*.jsonl")):
        return "verl"  # a folder holding verl's rollout_data_dir and validation_data_dir
    raise ImportRefused(
        f"{path.name}: neither TRL's completions tables (*.parquet), verl's dumps ({{step}}.jsonl) nor a Trackio "
        "project (<project>.db)"
    )


def convert(
    source: str,
    path: Path,
    options: dict,
    *,
    roots: list[Path] | None = None,
    skip=frozenset(),
    state: dict | None = None,
    watch=False,
    run_reward_names: list[str] | None = None,
) -> Converted:
    """``path`` read by the source's converter (runs.attach.importers) in a child process under the limits
    (runs.attach.importers.isolated), its reads confined to ``roots`` (the import roots by default). ``state``: what
    a watched folder's last read left; ``run_reward_names``: the run's, when it exists already (a watched folder's
    next read)."""
    if source not in SOURCES:
        raise ImportRefused(f"source: one of {', '.join(SOURCES)}, not {str(source)[:40]!r}")
    options = dict(options)
    if source == "verl" and options.get("metrics_file"):
        metrics_file = inside_roots(options["metrics_file"])
        if not metrics_file.is_file():
            raise ImportRefused("options.metrics_file: not a file")
        options["metrics_file"] = str(metrics_file)
    if source == "verl" and options.get("validation_path"):
        options["validation_path"] = str(validation_folder(options["validation_path"]))
    if source == "trackio":
        if watch:
            raise ImportRefused("watch: a Trackio project is imported whole, once (watch follows TRL and verl folders)")
        path = trackio_file(path)
    state = state or {}
    job = {
        "source": source,
        "path": str(path),
        "roots": [str(r) for r in (roots or import_roots())],
        "options": options,
        "skip": sorted(skip),
        "state": state,
        "settle_s": SETTLE_S if watch else None,
        "run_reward_names": run_reward_names,
        "metrics_step": state.get("metrics_step") if watch else None,
    }
    limits = Limits(
        memory_bytes=settings.GRPO_RUN_IMPORT_MEMORY_BYTES,
        cpu_seconds=settings.GRPO_RUN_IMPORT_CPU_SECONDS,
        wall_seconds=settings.GRPO_RUN_IMPORT_WALL_SECONDS,
    )
    return convert_isolated(job, limits=limits)


def validation_folder(path: str) -> Path:
    """verl's validation_data_dir (or one of its dumps) as a user named it, resolved under the import roots."""
    try:
        folder = inside_roots(path)
    except ImportRefused as exc:
        raise ImportRefused(f"validation_{exc}") from None
    try:
        check_links(folder, import_roots())
    except ImportRefused as exc:
        raise ImportRefused(f"validation_path: {exc}") from None
    return folder


def trackio_file(path: Path) -> Path:
    """The Trackio project file at ``path``: itself, or the one ``.db`` file of a folder (an upload's)."""
    if path.is_file():
        return path
    files = sorted(path.glob("*.db"))
    if len(files) != 1:
        raise ImportRefused(f"{path.name}: {len(files)} Trackio project files (.db): import one at a time")
    return files[0]


OPTION_TYPES = {
    "reward_names": (list, str),
    "reward_weights": (list, float),
    "num_generations": (int, None),
    "norm_adv_by_std_in_grpo": (bool, None),
    "metrics_file": (str, None),
    "validation_path": (str, None),  # verl's validation_data_dir, when it is not found beside the rollout dumps
    "run": (str, None),  # a Trackio project's run, by name
}


def clean_options(options: dict | None) -> dict:
    """The converter options a user gave, checked: ImportRefused names the option."""
    out = {}
    for key, value in (options or {}).items():
        if key not in OPTION_TYPES:
            raise ImportRefused(f"options.{key}: unknown (one of {', '.join(OPTION_TYPES)})")
        kind, item = OPTION_TYPES[key]
        if value is None:
            continue
        if kind is list:
            ok = isinstance(value, list) and len(value) <= 64
            ok = ok and all(
                isinstance(v, str) and 0 < len(v) <= 200
                if item is str
                else isinstance(v, int | float) and not isinstance(v, bool)
                for v in value
            )
            if not ok:
                raise ImportRefused(f"options.{key}: a list of {'names' if item is str else 'numbers'}")
        elif kind is int and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000):
            raise ImportRefused(f"options.{key}: a whole number from 1")
        elif not isinstance(value, kind):
            raise ImportRefused(f"options.{key}: must be {kind.__name__}")
        out[key] = value
    return out


def _events_with_time(converted: Converted, stamp: float) -> list[dict]:
    return [{**event, "ts": event.get("ts", stamp)} for event in converted.events]


def run_import(
    *,
    owner,
    source: str = "auto",
    path: str = "",
    uploads: list | None = None,
    name: str = "",
    model: str = "",
    options: dict | None = None,
    watch: bool = False,
    validation_path: str = "",
) -> Run:
    """An imported run from a server path (under GRPO_IMPORT_ROOTS) or uploaded files (``uploads``: objects with
    ``name`` and ``chunks()``, Django's UploadedFile). With ``watch``, the run stays running and the folder is read
    again every few seconds (verl and TRL folders on the server only). ``validation_path``: verl's
    validation_data_dir on the server, when ``path`` is not a folder holding it: its dumps are the run's periodic
    evaluations. ImportRefused names the file and row of what could not be read; nothing is stored then."""
    if validation_path:
        options = {**(options or {}), "validation_path": validation_path}
    options = clean_options(options)
    if options.get("validation_path"):
        if uploads:
            raise ImportRefused(
                "validation_path: a server path, beside a server path; uploaded, verl's validation dumps import "
                "alone (upload them without the rollout dumps: the run is its evaluations)"
            )
        options["validation_path"] = str(validation_folder(options["validation_path"]))
    if source not in ("auto", *SOURCES):
        raise ImportRefused(f"source: one of auto, {', '.join(SOURCES)}, not {str(source)[:40]!r}")
    if bool(path) == bool(uploads):
        raise ImportRefused("path: give a server path or upload files (one of them)")
    if watch and not uploads:
        watching = RunImport.objects.filter(run__owner=owner, watching=True).count()
        if watching >= settings.GRPO_IMPORT_WATCH_PER_USER:
            raise ImportRefused(
                f"watch: you watch {watching} folders already, the most one user may: stop watching one first"
            )
    folder = None
    try:
        if uploads:
            if watch:
                raise ImportRefused("watch: only a folder on the server can be watched, not an upload")
            folder = save_uploads(uploads)
            read = folder
            if source == "auto":
                source = detect(folder)
        else:
            read = inside_roots(path)
            check_links(read, import_roots())
            if source == "auto":
                source = detect(read)
        if options.get("validation_path") and source != "verl":
            raise ImportRefused(f"validation_path: verl's validation_data_dir, for verl's dumps, not {source}'s files")
        try:
            converted = convert(source, read, options, roots=[folder] if folder else None, watch=watch)
        except ImportFault as exc:
            raise ImportRefused(str(exc)) from None
        if not watch and not converted.events:
            raise ImportRefused(f"{read.name}: nothing to import (no rollouts, no evaluations and no metrics)")
        return _store(owner, source, read, folder, converted, name=name, model=model, options=options, watch=watch)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _store(owner, source, read, folder, converted: Converted, *, name, model, options, watch) -> Run:
    config = {**converted.config}
    config.pop("previous", None)
    if converted.total_steps:
        config["max_steps"] = converted.total_steps
    if converted.num_generations:
        config["num_generations"] = converted.num_generations
    if options.get("reward_weights"):
        config["reward_weights"] = options["reward_weights"]
    if source == "verl":
        config["scale_rewards"] = "group" if options.get("norm_adv_by_std_in_grpo", True) else "none"
    label = read.name if folder is None else "uploaded files"
    with transaction.atomic():
        run = external_run_create(
            owner=owner,
            name=name or f"{label} ({source})",
            origin=Run.Origin.IMPORTED,
            model=model,
            config=config,
            reward_names=converted.reward_names,
            dataset_label=f"{RunImport.Source(source).label}: {label}",
            notes=converted.notes,
            status=JobStatus.RUNNING if watch else JobStatus.COMPLETED,
        )
        RunImport.objects.create(
            run=run,
            source=source,
            path=str(read) if folder is None else ", ".join(sorted(p.name for p in folder.iterdir()))[:2000],
            uploaded=folder is not None,
            options=options,
            files=converted.files,
            state=_state(converted),
            every=converted.every,
            advantage_computed=converted.advantage_computed,
            length_known=converted.length_known,
            notes=converted.notes,
            watching=watch,
            polled_at=timezone.now(),
        )
        _append(run, converted)
        if watch:
            transaction.on_commit(lambda: enqueue_poll(run.pk))
    return run


def _state(converted: Converted) -> dict:
    """What the next read of a watched folder needs: the last batch's fingerprint (TRL writes a batch again at each
    step it trains on), the last step with metrics."""
    state = dict(converted.watch_state)
    if converted.config.get("previous"):
        state["previous"] = converted.config["previous"]
    steps = [e["step"] for e in converted.log_metrics]
    if steps:
        state["metrics_step"] = max(steps)
    return state


def _append(run: Run, converted: Converted) -> None:
    if not converted.events:
        return
    try:
        external_events_append(run=run, events=_events_with_time(converted, time.time()), imported=True)
    except EventRefused as exc:
        raise ImportRefused(str(exc)) from None


def save_uploads(uploads) -> Path:
    """Uploaded files into a folder of their own (names reduced to their last part), for the converters."""
    if len(uploads) > MAX_UPLOAD_FILES:
        raise ImportRefused(f"files: at most {MAX_UPLOAD_FILES} files in one import")
    folder = Path(settings.DATA_DIR) / "import-uploads" / uuid.uuid4().hex
    folder.mkdir(parents=True)
    for upload in uploads:
        name = Path(str(getattr(upload, "name", "") or "")).name
        if not name or name.startswith(".") or Path(name).suffix not in UPLOAD_NAMES:
            shutil.rmtree(folder, ignore_errors=True)
            raise ImportRefused(
                f"files: {name[:80] or 'a file without a name'}: upload .parquet (TRL), {{step}}.jsonl (verl) or "
                "a Trackio project's .db file"
            )
        with open(folder / name, "wb") as fh:
            for chunk in upload.chunks():
                fh.write(chunk)
    return folder


def enqueue_poll(run_id: int, countdown: float = WATCH_EVERY_S) -> None:
    try:
        queues.enqueue(queues.IMPORT_POLL, args=[run_id], countdown=countdown)
    except Exception as exc:  # a broker outage: the page offers to watch again
        log.warning("run %s: watch not scheduled: %s", run_id, exc)


def run_import_poll(*, run_id: int) -> bool:
    """Read what a watched folder gained since the last read and store it; True while the folder is still watched
    (the task schedules the next read). Idempotent: files already read are skipped, and rows and metrics are keyed
    by step, so a read repeated stores nothing twice. A file that cannot be read stops the watch, saying why; a
    folder that gained nothing for GRPO_IMPORT_WATCH_IDLE_S seconds ends the run."""
    ended = _poll(run_id)
    if ended is None:
        return True
    if ended is not False:
        run, error = ended
        external_run_finish(run=run, failed=bool(error), error=f"watch stopped: {error}" if error else "")
    return False


def _poll(run_id: int):
    """One read of a watched folder: None while it is still watched; False when it is no longer; (run, error) when
    this read ends it (error: why it stopped, "" when the folder went idle)."""
    with transaction.atomic():
        record = RunImport.objects.select_for_update().select_related("run").filter(run_id=run_id).first()
        if record is None or not record.watching:
            return False
        run = record.run
        if run.is_finished:
            record.watching = False
            record.save(update_fields=["watching"])
            return False
        now = timezone.now()
        try:
            path = inside_roots(record.path)
            check_links(path, import_roots())
            converted = convert(
                record.source,
                path,
                record.options,
                skip=record.files,
                state=record.state,
                watch=True,
                run_reward_names=run.reward_names,
            )
            _append(run, converted)
        except (ImportFault, ImportRefused) as exc:
            record.watching, record.error = False, str(exc)
            record.save(update_fields=["watching", "error"])
            return run, str(exc)
        update = ["polled_at"]
        record.polled_at = now
        state = {**record.state, **_state(converted), "bytes_read": converted.bytes_read}  # what this read cost
        if state != record.state:
            record.state = state
            update.append("state")
        if converted.files:
            record.files = record.files + converted.files
            record.advantage_computed = record.advantage_computed or converted.advantage_computed
            record.every = record.every or converted.every
            update += ["files", "advantage_computed", "every"]
        if converted.total_steps and converted.total_steps != run.total_steps:
            run.total_steps = converted.total_steps
            run.save(update_fields=["total_steps"])
        record.save(update_fields=update)
        if converted.files:
            run.last_contact_at = now
            run.save(update_fields=["last_contact_at"])
        idle = now - (run.last_contact_at or record.created_at)
        if idle > timedelta(seconds=settings.GRPO_IMPORT_WATCH_IDLE_S):
            record.watching = False
            record.save(update_fields=["watching"])
            return run, ""
    return None


def run_import_stop(*, run: Run) -> None:
    """Stop watching: the run is complete with what was read."""
    RunImport.objects.filter(run=run).update(watching=False)
    external_run_finish(run=run)


def completeness(run: Run) -> str:
    """How complete an imported run's record is, for its page and the API: "rollouts for 10 of 100 steps: TRL wrote
    every 10th batch"."""
    record = RunImport.objects.filter(run=run).first()
    if record is None:
        return ""
    steps = Rollout.objects.filter(run=run).values("step").distinct().count()
    validations = list(
        Evaluation.objects.filter(run=run, kind=Evaluation.Kind.PERIODIC)
        .exclude(imported_from="")
        .order_by("step")
        .values_list("step", flat=True)
    )
    return describe(record.source, steps, run.total_steps or None, record.every, validations)


def import_record(run: Run) -> dict | None:
    """What the run page shows of an imported run's files: the record, how complete it is, and verl's validation
    folder when its dumps are the run's evaluations."""
    record = RunImport.objects.filter(run=run).first()
    if record is None:
        return None
    validation = record.options.get("validation_path") or ""
    if not validation and any(name.startswith(VALIDATION) for name in record.files):
        validation = record.path  # found beside the rollout dumps, or the path itself
    return {"record": record, "completeness": completeness(run), "validation": validation}
