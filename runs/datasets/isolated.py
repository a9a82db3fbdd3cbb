"""Untrusted dataset files are read in a child process, never in the web server or a worker.

A file can crash a parser (pyarrow's JSON reader segfaults on values nested a few thousand deep), exhaust memory or
spin: in a child with limits on memory and CPU time and a wall-clock timeout, any of that ends the child, and the
caller gets a DatasetError. When the child dies on a signal, the file is read once more on the precise road
(Python's parsers only, which name the line at fault); only if that dies too is the crash itself reported.

No Django here: the child is ``python -m runs.datasets.isolated JOB.json`` and imports only the readers.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from runs.datasets.importing import (
    DatasetError,
    ImportOptions,
    ImportResult,
    hf_batches,
    import_arrow,
    import_file,
    load_hf,
)
from runs.limited import Limits, WallTimeout, exit_now, out_of_memory, run_limited

# What the child may see of the parent's environment beyond runs.limited's: the hub's settings (no secret)
PASSED_ENV = (
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "HF_DATASETS_CACHE",
    "HF_ENDPOINT",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
)
ParseLimits = Limits  # a dataset's: memory, CPU seconds, wall seconds (runs.datasets.services sets them)


Progress = Callable[[int], None]  # called with the rows written so far, about every second


def import_file_isolated(
    source: Path,
    *,
    filename: str,
    dest: Path,
    workdir: Path,
    options: ImportOptions,
    limits: ParseLimits,
    cwd: Path,
    on_progress: Progress | None = None,
) -> ImportResult:
    """``importing.import_file`` in a child process under ``limits``; the same result or DatasetError."""
    job = {"kind": "file", "source": str(source), "filename": filename}
    outcome = _run_child(
        job, dest=dest, workdir=workdir, options=options, limits=limits, cwd=cwd, on_progress=on_progress
    )
    if isinstance(outcome, str) and not options.precise:  # died on a signal: the precise road names the line
        dest.unlink(missing_ok=True)
        retry = dataclasses.replace(options, precise=True)
        outcome = _run_child(
            job, dest=dest, workdir=workdir, options=retry, limits=limits, cwd=cwd, on_progress=on_progress
        )
    return _result(outcome, filename, limits)


def import_hf_isolated(
    *,
    local_path: Path | None,
    hub_id: str,
    config: str,
    split: str,
    dest: Path,
    workdir: Path,
    options: ImportOptions,
    limits: ParseLimits,
    cwd: Path,
    on_progress: Progress | None = None,
) -> ImportResult:
    """A Hugging Face dataset (a local folder, or the hub when online) loaded and checked in a child process."""
    job = {
        "kind": "hf",
        "local_path": str(local_path) if local_path else "",
        "hub_id": hub_id,
        "config": config,
        "split": split,
        "filename": local_path.name if local_path else hub_id,
    }
    if not local_path:
        # a hub id is loaded where no folder can answer to it: datasets.load_dataset looks for a local folder of the
        # id's name first, and relative to the server's folder "var" would be every user's data
        cwd = workdir / "hub"
        cwd.mkdir(exist_ok=True)
    outcome = _run_child(
        job, dest=dest, workdir=workdir, options=options, limits=limits, cwd=cwd, on_progress=on_progress
    )
    return _result(outcome, job["filename"], limits)


def _result(outcome: ImportResult | str, filename: str, limits: ParseLimits) -> ImportResult:
    if isinstance(outcome, str):
        raise DatasetError(
            [
                f"{filename} could not be read: the reader stopped on signal {outcome} (a limit of "
                f"{limits.said()} applies)"
            ]
        )
    return outcome


def _run_child(
    job: dict,
    *,
    dest: Path,
    workdir: Path,
    options: ImportOptions,
    limits: ParseLimits,
    cwd: Path,
    on_progress: Progress | None = None,
) -> ImportResult | str:
    """The child's result; or the signal that ended it (a crash, a limit)."""
    filename = job["filename"]
    job_path, result, progress = workdir / "job.json", workdir / "result.json", workdir / "progress"
    result.unlink(missing_ok=True)
    options = dataclasses.replace(options, progress_path=str(progress) if on_progress else "")
    job_path.write_text(
        json.dumps(
            {
                **job,
                "dest": str(dest),
                "workdir": str(workdir),
                "options": dataclasses.asdict(options),
                "result": str(result),
            }
        )
    )

    def every_second() -> None:
        if on_progress is not None and progress.exists():
            try:
                on_progress(int(progress.read_text()))
            except ValueError:
                pass  # read while the child was writing it: the next second tells

    try:
        ended = run_limited(
            "runs.datasets.isolated", job_path, limits=limits, cwd=cwd, passed_env=PASSED_ENV, every_second=every_second
        )
    except WallTimeout:
        raise DatasetError([f"{filename} took longer than {limits.wall_seconds} s to read, the limit"]) from None
    if ended.signal is not None:
        return ended.signal_name()
    try:
        answer = json.loads(result.read_text())
    except (OSError, ValueError):
        if ended.out_of_memory():
            raise DatasetError(
                [f"{filename} needs more than {limits.memory_bytes // 1024**2} MB of memory to read, the limit"]
            ) from None
        raise DatasetError([f"{filename} could not be read ({ended.stderr_tail[:300]})"]) from None
    if answer.get("errors"):
        raise DatasetError(answer["errors"])
    return ImportResult(**answer["result"])


def _import_hf(job: dict, *, dest: Path, workdir: Path, options: ImportOptions) -> ImportResult:
    ds = load_hf(
        local_path=Path(job["local_path"]) if job["local_path"] else None,
        hub_id=job["hub_id"],
        config=job["config"],
        split=job["split"],
        cache_dir=workdir / "cache",
    )
    if ds.data.nbytes > options.max_bytes:
        raise DatasetError([f"the dataset is {ds.data.nbytes} bytes; the limit is {options.max_bytes}"])
    batches, schema = hf_batches(ds)
    return import_arrow(batches, schema, dest=dest, options=options)


def main(argv: list[str] | None = None) -> int:
    job = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    result_path = Path(job["result"])
    options, dest, workdir = ImportOptions(**job["options"]), Path(job["dest"]), Path(job["workdir"])
    try:
        if job["kind"] == "hf":
            result = _import_hf(job, dest=dest, workdir=workdir, options=options)
        else:
            result = import_file(
                Path(job["source"]), filename=job["filename"], dest=dest, workdir=workdir, options=options
            )
        answer = {"result": dataclasses.asdict(result)}
    except DatasetError as exc:
        answer = {"errors": exc.errors}
    except MemoryError:
        answer = {"errors": [f"{job['filename']} needs more memory to read than the limit allows"]}
    except RecursionError:
        answer = {"errors": [f"{job['filename']}: values are nested too deeply to read"]}
    except Exception as exc:  # a reader's own error: the file is at fault, say what the reader said
        traceback.print_exc()
        if out_of_memory(f"{type(exc).__name__}: {exc}"):
            # e.g. a module the reader loads lazily could not be mapped under the address-space limit
            answer = {"errors": [f"{job['filename']} needs more memory to read than the limit allows"]}
        else:
            answer = {"errors": [f"{job['filename']} could not be read ({type(exc).__name__}: {str(exc)[:300]})"]}
    result_path.write_text(json.dumps(answer))
    return 0


if __name__ == "__main__":
    exit_now(main())
