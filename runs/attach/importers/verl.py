"""verl's rollout dumps as events: the ``{step}.jsonl`` files verl writes into ``trainer.rollout_data_dir`` (or
``trainer.validation_data_dir``), read by workers.training.protocol.verl_dump, the reader grpo-web's own verl runs
use. verl writes no advantage: unless grpo-web's capture wrote it, the advantages are recomputed from the scores with
verl's GRPO estimator (``norm_adv_by_std_in_grpo`` as verl's default, true, unless told otherwise) and the run page
says so.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from runs.attach.importers import MAX_FILE_BYTES, MAX_FILES, Converted, ImportFault
from workers.training.protocol.verl_dump import DumpError, dump_event, read_dump, reward_keys, reward_means
from workers.training.verl_data import metrics_event

MAX_LOG_BYTES = 512 * 1024 * 1024


def dump_files(path: str | Path) -> list[Path]:
    """The ``{step}.jsonl`` dumps in a folder (or one dump), in step order."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ImportFault(f"{path.name}: no such folder")
    files = [p for p in path.glob("*.jsonl") if p.stem.isdigit() and p.is_file()]
    if len(files) > MAX_FILES:
        raise ImportFault(f"{path.name}: {len(files)} dumps, more than {MAX_FILES}")
    return sorted(files, key=lambda p: int(p.stem))


def convert(
    path: str | Path,
    *,
    norm_by_std: bool = True,
    reward_names: list[str] | None = None,
    skip: set[str] = frozenset(),
    settle_s: float | None = None,
    metrics_file: Path | None = None,
) -> Converted:
    """The dumps under ``path`` as rollouts events, and each step's mean score and rewards as metrics.
    ``reward_names``: the reward-info keys that are reward functions (default: those holding numbers on every line);
    ``skip``: dumps already imported (watch mode); ``settle_s``: leave the newest dump for later while verl may still
    be writing it (modified within that many seconds); ``metrics_file``: verl's file logger (``trainer.logger`` with
    ``file``: ``{"step", "data"}`` lines), else a ``*.jsonl`` beside the dumps that has its shape."""
    files = [f for f in dump_files(path) if f.name not in skip]
    if not files and not skip and settle_s is None:
        raise ImportFault(f"{Path(path).name}: no verl dumps ({{step}}.jsonl, as verl writes to rollout_data_dir)")
    if settle_s is not None and files and time.time() - files[-1].stat().st_mtime < settle_s:
        files = files[:-1]
    out = Converted(source="verl", every=1)
    names = reward_names
    for file in files:
        if file.stat().st_size > MAX_FILE_BYTES:
            raise ImportFault(f"{file.name}: {file.stat().st_size} bytes, more than {MAX_FILE_BYTES} a dump may hold")
        try:
            lines = read_dump(file)
            if not lines:
                out.files.append(file.name)
                continue
            keys = reward_keys(lines) if names is None else names
            missing = [k for k in keys if any(k not in line for line in lines)]
            if missing:
                raise DumpError(f"{file.name}: no reward key {', '.join(repr(k) for k in missing)} on every line")
            event, computed = dump_event(file, lines, reward_keys_=keys, norm_by_std=norm_by_std)
        except DumpError as exc:
            raise ImportFault(str(exc)) from None
        if names is None:
            names = keys
        out.advantage_computed = out.advantage_computed or computed
        out.length_known = out.length_known and any(r["length"] for r in event["rows"])
        out.num_generations = out.num_generations or event["num_generations"]
        scores = [r["reward"] for r in event["rows"] if r["reward"] is not None]
        metrics = reward_means(event)
        if scores:
            metrics |= {"critic/score/mean": sum(scores) / len(scores), "reward": sum(scores) / len(scores)}
        out.events += [event, {"type": "metrics", "step": event["step"], "max_steps": 0, "metrics": metrics}]
        out.files.append(file.name)
    out.reward_names = names or []
    log = metrics_file or find_metrics_file(path)
    if log is not None:
        out.log_metrics = read_metrics(log)
        out.events += out.log_metrics
        out.events.sort(key=lambda e: (e["step"], e["type"] != "rollouts"))
    if out.advantage_computed:
        out.notes.append(
            "advantages computed by grpo-web from the scores with verl's GRPO estimator "
            f"(norm_adv_by_std_in_grpo={str(norm_by_std).lower()}, epsilon 1e-6): verl's dump holds none"
        )
    if not out.length_known and out.events:
        out.notes.append("verl's dump holds no token counts: lengths are 0")
    return out


def _log_line(line: bytes):
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("data"), dict) and "step" in data else None


def find_metrics_file(path: str | Path) -> Path | None:
    """A verl file-logger log beside the dumps: a ``*.jsonl`` not named ``{step}`` whose first line is
    ``{"step", "data"}``."""
    path = Path(path)
    if not path.is_dir():
        return None
    for candidate in sorted(path.glob("*.jsonl")):
        if candidate.stem.isdigit() or not candidate.is_file():
            continue
        with open(candidate, "rb") as fh:
            first = fh.readline(1024 * 1024)
        if _log_line(first) is not None:
            return candidate
    return None


def read_metrics(path: Path) -> list[dict]:
    """verl's file logger as "metrics" events (TRL's names beside verl's: workers.training.verl_data.metrics_event);
    a last line without its newline is left for the next read."""
    if path.stat().st_size > MAX_LOG_BYTES:
        raise ImportFault(f"{path.name}: more than {MAX_LOG_BYTES} bytes")
    data = path.read_bytes()
    data = data[: data.rfind(b"\n") + 1]
    events = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        parsed = _log_line(line)
        step = parsed.get("step") if parsed else None
        if parsed is None or isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ImportFault(
                f'{path.name}: line {number}: not a verl file-logger line ({{"step": N, "data": {{...}}}})'
            )
        events.append(metrics_event(parsed, 0))
    return events
