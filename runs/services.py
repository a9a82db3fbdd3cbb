"""Writes. Keyword-only functions named <entity>_<action>."""

from __future__ import annotations

import tempfile
from dataclasses import asdict
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from runs.dataset_mapping import Mapping, check_mapping, default_mapping
from runs.datasets import DatasetError, ImportOptions, ImportResult, hf_batches, import_arrow, import_file, load_hf, \
    save_stream
from runs.models import Dataset, DatasetVersion, Run
from workers.config import EvalFields, GRPOFields, RewardSpec, TrainConfig


def _datasets_dir() -> Path:
    path = settings.DATA_DIR / "datasets"
    path.mkdir(parents=True, exist_ok=True)
    return path


def hf_import_root() -> Path:
    """Server folders a user may import from by path: only under here, never the rest of the machine."""
    return settings.DATA_DIR / "imports"


def _import_options(prompt_column: str, gsm8k_column: str) -> ImportOptions:
    return ImportOptions(prompt_column=prompt_column or "prompt", gsm8k_column=gsm8k_column,
                         max_bytes=settings.GRPO_MAX_UPLOAD_BYTES)


def _import(convert, *, owner, name: str, source_name: str, dataset: Dataset | None,
            prompt_column: str) -> DatasetVersion:
    """Run ``convert(dest, workdir) -> ImportResult`` outside any transaction, then record the version.

    On any error nothing is saved: no rows (the transaction rolls back), no files (removed here)."""
    folder = _datasets_dir()
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


def dataset_import(*, owner, name: str, stream=None, path: Path | None = None, source_name: str = "",
                   dataset: Dataset | None = None, prompt_column: str = "prompt",
                   gsm8k_column: str = "") -> DatasetVersion:
    """Validate an uploaded file (JSON lines, JSON, CSV or Parquet; .gz or .zip) and store it as a new version.

    The format comes from ``source_name``'s extension and is checked against the file's first bytes. Give the file
    as ``stream`` (an upload; copied to disk in chunks unless Django already wrote it there) or as ``path``."""
    options = _import_options(prompt_column, gsm8k_column)
    filename = source_name or (path.name if path else "upload")

    def convert(dest: Path, workdir: Path) -> ImportResult:
        source = path
        if source is None:
            on_disk = getattr(stream, "temporary_file_path", None)
            source = Path(on_disk()) if on_disk else save_stream(stream, workdir / "upload", options.max_bytes)
        return import_file(Path(source), filename=filename, dest=dest, workdir=workdir, options=options)

    return _import(convert, owner=owner, name=name, source_name=filename, dataset=dataset,
                   prompt_column=options.prompt_column)


def dataset_import_hf(*, owner, name: str, local_path: str = "", hub_id: str = "", config: str = "",
                      split: str = "", dataset: Dataset | None = None, prompt_column: str = "prompt",
                      gsm8k_column: str = "") -> DatasetVersion:
    """Import a Hugging Face dataset: a folder under ``hf_import_root()`` (saved with ``save_to_disk``, a data
    folder, or one data file), or a hub id + config + split when the server is online. Runs in the request."""
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
        ds = load_hf(local_path=local, hub_id=hub_id, config=config, split=split, cache_dir=workdir / "cache")
        if ds.data.nbytes > options.max_bytes:
            raise DatasetError([f"the dataset is {ds.data.nbytes} bytes; the limit is {options.max_bytes}"])
        batches, schema = hf_batches(ds)
        return import_arrow(batches, schema, dest=dest, options=options)

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


class RunRefused(Exception):
    """The run would fail: each message names the field or the reward function."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def run_create(*, owner, name: str, model: str, dataset_version: DatasetVersion, rewards: list[dict],
               config: dict, config_extra: dict | None = None, requested_gpus: int = 0,
               evaluation: dict | None = None, parent: Run | None = None) -> Run:
    """Validate, check each reward's contract in the sandbox, and queue the run once its row is committed."""
    from rewards.selectors import reward_specs

    specs = reward_specs(rewards)
    evaluation = {k: v for k, v in (evaluation or {}).items() if v is not None}
    spec = TrainConfig(model=model, dataset_path=dataset_version.path, output_dir="", event_log="",
                       rewards=[RewardSpec(**r) for r in specs], grpo=GRPOFields(**config),
                       evaluation=EvalFields(**evaluation))
    errors = spec.validate() + model_problems(model)
    if spec.evaluation.eval_steps and not dataset_version.eval_rows:
        errors.append(f"eval_steps: {dataset_version} has no eval split; map one on the dataset's mapping page, or "
                      f"set eval_steps to 0")
    if errors:
        raise RunRefused(errors)
    problems = reward_contract_problems([s for s in specs if s.get("source")], dataset_version)
    if problems:
        raise RunRefused(problems)
    with transaction.atomic():
        run = Run.objects.create(owner=owner, name=name, model=model, dataset_version=dataset_version,
                                 rewards=rewards, config=config, config_extra=config_extra or {},
                                 evaluation=asdict(spec.evaluation) if spec.evaluation.eval_steps else {},
                                 total_steps=config["max_steps"], requested_gpus=requested_gpus, parent=parent)
        transaction.on_commit(lambda: _enqueue(run))
    return run


def reward_contract_problems(specs: list[dict], dataset_version: DatasetVersion) -> list[str]:
    """Run each reward on a few rows in the sandbox (on a sandbox worker, never here) before a GPU is spent on it."""
    if not specs:
        return []
    from celery.exceptions import TimeoutError as CeleryTimeout

    from grpo_web.embedded import ensure_configured_redis
    from rewards.tasks import reward_contract_check

    ensure_configured_redis()
    pending = reward_contract_check.apply_async(kwargs={
        "rewards": [{"name": s["name"], "source": s["source"], "entrypoint": s["entrypoint"]} for s in specs],
        "dataset_version_id": dataset_version.pk,
    })
    try:
        return pending.get(timeout=settings.GRPO_CONTRACT_CHECK_TIMEOUT)
    except CeleryTimeout:
        return [f"rewards: no sandbox worker checked the reward functions within "
                f"{settings.GRPO_CONTRACT_CHECK_TIMEOUT} s; is a worker serving the 'sandbox' queue running?"]
    finally:
        pending.forget()


def model_problems(model: str) -> list[str]:
    """A local model folder must hold a config.json; a hub id must at least look like one (org/name)."""
    from workers.supervisor import resolve_model

    path = Path(resolve_model(model))
    if path.is_absolute() or model.startswith((".", "~")) or path.exists():
        if not (path / "config.json").is_file():
            return [f"model: no loadable model at {path} (no config.json)"]
        return []
    if model.count("/") != 1 or not all(part.strip() for part in model.split("/")):
        return [f"model: '{model}' is neither a local folder nor a hub id like org/name"]
    return []


def _enqueue(run: Run) -> None:
    from grpo_web.embedded import ensure_configured_redis
    from workers.tasks import train_run, training_queue

    ensure_configured_redis()
    train_run.apply_async(args=[run.pk], queue=training_queue(run.requested_gpus))


def run_cancel(*, run: Run) -> Run:
    """Queued: cancelled at once. Running: flagged; the supervisor stops the training process within seconds and
    keeps everything already ingested."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status == Run.Status.QUEUED:
            run.mark_cancelled()
        elif run.status == Run.Status.RUNNING and run.cancel_requested_at is None:
            run.cancel_requested_at = timezone.now()
            run.save(update_fields=["cancel_requested_at"])
    return run


def run_resume(*, run: Run) -> Run:
    """A failed run with a checkpoint continues from it: same run, same step numbering, attempt + 1."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if run.status != Run.Status.FAILED or not run.resumable:
            raise RunRefused(["only a failed run with a checkpoint can be resumed"])
        if run.checkpoint_step >= run.total_steps:
            # every step is trained and saved (the process died after its last checkpoint): nothing to resume
            run.status, run.error, run.resumable, run.step = Run.Status.COMPLETED, "", False, run.total_steps
            run.save(update_fields=["status", "error", "resumable", "step"])
            return run
        run.status, run.attempt, run.error, run.resumable = Run.Status.QUEUED, run.attempt + 1, "", False
        run.finished_at = run.cancel_requested_at = None
        run.save(update_fields=["status", "attempt", "error", "resumable", "finished_at", "cancel_requested_at"])
        transaction.on_commit(lambda: _enqueue(run))
    return run


def run_retry(*, run: Run) -> Run:
    """Run the same configuration again from scratch, as a new run that remembers where it came from."""
    return run_create(owner=run.owner, name=f"{run.name} (retry)", model=run.model,
                      dataset_version=run.dataset_version, rewards=run.rewards, config=run.config,
                      config_extra=run.config_extra, requested_gpus=run.requested_gpus, evaluation=run.evaluation,
                      parent=run)


def run_reap_stale(*, now=None, timeout: float | None = None) -> list[Run]:
    """Running runs whose supervisor went silent (a worker killed, a machine lost): ingest what their event log holds,
    then mark them failed, resumable where a checkpoint exists. Called by every worker's heartbeat and when a run's
    page is looked at."""
    from datetime import timedelta

    from workers.supervisor import event_log_path

    now = now or timezone.now()
    limit = now - timedelta(seconds=settings.GRPO_HEARTBEAT_TIMEOUT if timeout is None else timeout)
    reaped = []
    for run_id in Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=limit).values_list("pk", flat=True):
        with transaction.atomic():
            run = Run.objects.select_for_update(skip_locked=True).filter(
                pk=run_id, status=Run.Status.RUNNING, heartbeat_at__lt=limit).first()
            if run is None:
                continue
            from runs.ingest import ingest_log

            _, events = ingest_log(run, event_log_path(run))
            if any(e["type"] == "finished" for e in events):
                run.mark_completed()  # training finished; only its supervisor died before saying so
                reaped.append(run)
                continue
            seconds = int((now - run.heartbeat_at).total_seconds())
            run.mark_failed(f"the worker {run.worker_name or ''} stopped responding (no heartbeat for {seconds} s)")
            reaped.append(run)
    return reaped


# --- inspection: the reflection phrase list, rejection sampling ---------------------------------------------------

RETAG_INLINE_ROWS = 20_000  # a run with more rollouts is re-tagged by a task on the default queue


def run_reflection_phrases_update(*, run: Run, phrases: list[str]) -> bool:
    """Save a run's edited phrase list (``runs.reflection.clean_phrases`` first) and re-tag its stored rollouts:
    here for a small run, by a task for a large one. Returns True when the re-tagging was queued."""
    from runs.models import Rollout

    run.reflection_phrases = phrases
    run.save(update_fields=["reflection_phrases"])
    if Rollout.objects.filter(run=run)[:RETAG_INLINE_ROWS + 1].count() <= RETAG_INLINE_ROWS:
        rollout_reflections_retag(run_id=run.pk)
        return False
    from grpo_web.embedded import ensure_configured_redis
    from runs.tasks import retag_reflections

    ensure_configured_redis()
    transaction.on_commit(lambda: retag_reflections.delay(run.pk))
    return True


def rollout_reflections_retag(*, run_id: int, chunk: int = 5000) -> int:
    """Match the run's current phrase list against its stored completions; update the rows whose tags changed.
    Returns how many changed."""
    from runs.models import Rollout
    from runs.reflection import matcher, reflection_mask

    run = Run.objects.get(pk=run_id)
    phrases = tuple(run.reflection_phrases)
    find = matcher(phrases).find
    changed, last = 0, 0
    while True:
        rows = list(Rollout.objects.filter(run=run, id__gt=last).order_by("id")
                    .only("id", "completion", "reflections", "reflection_mask")[:chunk])
        if not rows:
            return changed
        last = rows[-1].id
        updates = []
        for r in rows:
            tags = find(r.completion)
            mask = reflection_mask(tags, phrases)  # bits move when phrases do
            if tags != r.reflections or mask != r.reflection_mask:
                r.reflections, r.reflective, r.reflection_mask = tags, bool(tags), mask
                updates.append(r)
        Rollout.objects.bulk_update(updates, ["reflections", "reflective", "reflection_mask"], batch_size=1000)
        changed += len(updates)


def dataset_from_rollouts(*, run: Run, data: dict, threshold: float, name: str = "") -> DatasetVersion:
    """Rejection sampling: the run's completions (with the browser's filters) whose total reward is at least
    ``threshold``, as a new dataset of the run's owner in TRL's prompt-completion SFT format (columns ``prompt`` and
    ``completion``; the prompt as the run stored it, as text). DatasetError when no completion qualifies."""
    from runs.exports import write_sft_jsonl

    with tempfile.TemporaryDirectory(dir=_datasets_dir(), prefix=".sft-") as workdir:
        path = Path(workdir) / "sft.jsonl"
        if not write_sft_jsonl(run, data, threshold, path):
            raise DatasetError([f"no completion of this run has a reward of at least {threshold:g} with these "
                                f"filters"])
        return dataset_import(owner=run.owner, name=name or f"{run.name}: reward ≥ {threshold:g} (SFT)", path=path,
                              source_name=f"run-{run.pk}-sft.jsonl")
