"""A converter (runs.attach.importers) run in a child process of its own, under limits: never in the web process or
a worker itself.

The files are a user's: a Trackio project whose ``metrics`` is a recursive view runs without end, a sparse dump
reads as a gigabyte of zeros, a parquet file may ask for any memory. In a child with limits on its address space
and CPU time and a wall-clock timeout, any of that ends the child, and the caller gets an ImportFault naming the
file and the limit. The child confines its reads to the import roots (runs.attach.importers.rootfs).

No Django here: the child is ``python -m runs.attach.importers.isolated JOB.json``; the job names the source, the
path, the roots and the converter's options; the answer is the Converted, or the error.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import sys
import tempfile
import traceback
from pathlib import Path

import orjson

from runs.attach.importers import Converted, ImportFault
from runs.limited import Limits, WallTimeout, exit_now, run_limited

__all__ = ["Limits", "convert_isolated"]


def convert_isolated(job: dict, *, limits: Limits) -> Converted:
    """``job`` (source, path, roots, options: see ``run``) converted in a child process under ``limits``; the
    Converted, or ImportFault naming the file (the path's last part) and what stopped it."""
    name = Path(job["path"]).name
    with tempfile.TemporaryDirectory(prefix="grpo-import-") as work:
        job_path, result = Path(work) / "job.json", Path(work) / "result.json"
        job_path.write_text(json.dumps({**job, "result": str(result)}))
        try:
            ended = run_limited("runs.attach.importers.isolated", job_path, limits=limits, cwd=Path(work))
        except WallTimeout:
            raise ImportFault(f"{name}: reading took longer than {limits.wall_seconds} s, the limit") from None
        if ended.signal is not None:
            if ended.out_of_memory():  # glibc or a C++ reader aborting when the address-space limit says no
                raise ImportFault(_memory_message(name, limits.memory_bytes))
            raise ImportFault(
                f"{name}: reading stopped on signal {ended.signal_name()} (the limits are {limits.said()})"
            )
        try:
            answer = orjson.loads(result.read_bytes())
        except (OSError, ValueError):
            if ended.out_of_memory():
                raise ImportFault(_memory_message(name, limits.memory_bytes)) from None
            raise ImportFault(f"{name}: could not be read ({ended.stderr_tail[:300]})") from None
    if "error" in answer:
        raise ImportFault(answer["error"])
    return Converted(**answer["converted"])


def _memory_message(name: str, memory_bytes: int) -> str:
    return f"{name}: needs more than {memory_bytes // 1024**2} MB of memory to read, the limit"


def run(job: dict) -> Converted:
    """The job's converter on its path. ``options``: the converter's (paths in them checked by the caller, under the
    roots); ``skip``, ``state``, ``watch``, ``run_reward_names``: a watched folder's next read."""
    source, path, options = job["source"], Path(job["path"]), job.get("options") or {}
    state = job.get("state") or {}
    settle_s = job.get("settle_s")
    skip = set(job.get("skip") or ())
    if source == "trl":
        from runs.attach.importers import trl

        return trl.convert(
            path,
            reward_names=options.get("reward_names"),
            reward_weights=options.get("reward_weights"),
            num_generations=options.get("num_generations"),
            skip=skip,
            previous=state.get("previous"),
            settle_s=settle_s,
            state=state,
        )
    if source == "verl":
        from runs.attach.importers import verl

        return verl.convert(
            path,
            validation=options.get("validation_path") or None,
            norm_by_std=options.get("norm_adv_by_std_in_grpo", True),
            reward_names=options.get("reward_names"),
            run_reward_names=job.get("run_reward_names"),
            skip=skip,
            settle_s=settle_s,
            metrics_file=Path(options["metrics_file"]) if options.get("metrics_file") else None,
            state=state,
        )
    if source == "trackio":
        from runs.attach.importers import trackio

        return trackio.convert(
            path,
            run=options.get("run"),
            reward_names=options.get("reward_names"),
            reward_weights=options.get("reward_weights"),
            num_generations=options.get("num_generations"),
        )
    raise ImportFault(f"source: {str(source)[:40]!r} is not one the importers read")


def _dumps(converted: Converted) -> bytes:
    data = dataclasses.asdict(converted)
    try:
        return orjson.dumps({"converted": data}, default=str)
    except TypeError:  # an integer past 64 bits in a dump's extra columns: Python's JSON writes it
        return json.dumps({"converted": data}, default=str).encode()


def main(argv: list[str] | None = None) -> int:
    from runs.attach.importers import rootfs

    job = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    name = Path(job["path"]).name
    rootfs.confine(job["roots"])
    try:
        converted = run(job)
        if job.get("metrics_step") is not None:  # a log's metrics stored by an earlier read are not sent again
            converted.events = converted.fresh_events(job["metrics_step"])
        converted.bytes_read = rootfs.bytes_read()
        answer = _dumps(converted)
    except ImportFault as exc:
        answer = orjson.dumps({"error": str(exc)})
    except MemoryError:
        answer = orjson.dumps({"error": _memory_message(name, resource.getrlimit(resource.RLIMIT_AS)[0])})
    except RecursionError:
        answer = orjson.dumps({"error": f"{name}: values nested too deeply to read"})
    except Exception as exc:  # a reader's own error: the file is at fault, say what the reader said
        traceback.print_exc()
        answer = orjson.dumps({"error": f"{name}: could not be read ({type(exc).__name__}: {str(exc)[:300]})"})
    Path(job["result"]).write_bytes(answer)
    return 0


if __name__ == "__main__":
    exit_now(main())
