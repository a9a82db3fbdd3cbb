"""verl's dumps as events: the ``{step}.jsonl`` files verl writes into ``trainer.rollout_data_dir`` (a "rollouts"
event a trained step) and ``trainer.validation_data_dir`` (a validation every ``test_freq`` steps, before training
and at the last step: a periodic "eval" event each, the run's evaluations), read by
grpo_web_protocol.verl_dump, the reader grpo-web's own verl runs use. verl writes no advantage: unless
grpo-web's capture wrote it, the advantages are recomputed from the scores with verl's GRPO estimator
(``norm_adv_by_std_in_grpo`` as verl's default, true, unless told otherwise) and the run page says so.

Both dumps have the same format; a validation dump is told from a rollout dump by the key RayPPOTrainer._validate
adds to every line: ``reward``, equal to ``score`` (``validation_path`` names its folder outright). A path may be the
rollout folder, the validation folder (the run is its evaluations alone), or a folder holding both.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
from grpo_web_protocol.scoring import TOTAL, metrics
from grpo_web_protocol.verl_dump import (
    LENGTH_KEY,
    MAX_LINE_BYTES,
    NOT_REWARDS,
    TRUNCATED_KEY,
    DumpError,
    dump_event,
    dump_step,
    metrics_event,
    number,
    read_dump,
    reward_keys,
    reward_means,
)

from runs.attach.checks import MAX_ROWS, MAX_SMALL
from runs.attach.importers import MAX_FILE_BYTES, MAX_FILES, VALIDATION, Converted, ImportFault
from runs.attach.importers.rootfs import open_file

MAX_LOG_BYTES = 512 * 1024 * 1024
THRESHOLD = 1.0  # a validation completion is correct when verl's acc (else its score) is at least this
VALIDATION_NOTE = (
    "evaluations from verl's validation dump (trainer.validation_data_dir): k is the completions per prompt "
    "(val_kwargs.n), grouped by prompt text; a completion is correct when verl's acc (else its score) is at least 1; "
    "maj@k votes on verl's pred; verl's dump has no separate greedy completion, no token counts and not the sampling "
    "settings"
)


def dump_files(path: str | Path) -> list[Path]:
    """The ``{step}.jsonl`` dumps in a folder (or one dump), in step order."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ImportFault(f"{path.name}: no such folder")
    files = [p for p in path.glob("*.jsonl") if p.stem.isdigit() and not p.is_dir()]  # a pipe is refused by name
    if len(files) > MAX_FILES:
        raise ImportFault(f"{path.name}: {len(files)} dumps, more than {MAX_FILES}")
    return sorted(files, key=lambda p: int(p.stem))


def is_validation_line(row) -> bool:
    """A line of verl's validation dump: RayPPOTrainer._validate adds the score to the reward-extra-info as
    ``reward``, so each of its lines holds ``reward`` equal to ``score``; a rollout dump's lines hold no ``reward``."""
    return (
        isinstance(row, dict)
        and "reward" in row
        and "score" in row
        and (number(row["reward"]) == number(row["score"]) or row["reward"] == row["score"])
    )


def dump_kind(file: Path) -> str | None:
    """The kind of dump ``file`` is, by its first line: "validation" (a validation dump's line), "rollout" (another
    line), "unreadable" (not a JSON line: reading the dump whole names the fault); None when it has no line."""
    with open_file(file) as fh:
        while line := fh.readline(MAX_LINE_BYTES + 1):
            if len(line) > MAX_LINE_BYTES:
                return "unreadable"
            if line.strip():
                try:
                    return "validation" if is_validation_line(orjson.loads(line)) else "rollout"
                except orjson.JSONDecodeError:
                    return "unreadable"
    return None


def _dump_folders(path: Path) -> list[Path]:
    """The folders holding verl's dumps at ``path``: itself, else its sub-folders that hold ``{step}.jsonl``."""
    if path.is_file() or dump_files(path):
        return [path]
    folders = [p for p in sorted(path.iterdir()) if p.is_dir() and not p.is_symlink() and dump_files(p)]
    return folders or [path]


def find_dumps(
    path: str | Path,
    validation: str | Path | None = None,
    settle_s: float | None = None,
    kinds: dict[str, str] | None = None,
) -> tuple[list[Path], list[Path], Path | None]:
    """The rollout dumps and the validation dumps at ``path`` (a dump folder, a folder holding both, or one dump),
    each in step order, and the folder the rollouts are in. ``validation``: verl's validation_data_dir named
    outright: all its dumps are validations. Otherwise each dump is told by its first line (dump_kind: one line read
    a dump, each time; the names of those read before do not tell, as a rollout and a validation of one step share
    theirs); a dump with no line yet is left out. ``settle_s``: a dump modified within that many seconds is left out
    (verl may still be writing it). ``kinds``: the kind of each dump told before, by its path under ``path`` (watch
    mode: a dump's first line is read once); the dumps told now are added."""
    path = Path(path)
    now = time.time()
    kinds = {} if kinds is None else kinds

    def settled(file: Path) -> bool:
        return settle_s is None or now - file.stat().st_mtime >= settle_s

    given = [f for f in dump_files(validation) if settled(f)] if validation is not None else []
    rollouts: list[Path] = []
    found: list[Path] = []
    holders: dict[str, set[Path]] = {"rollout": set(), "validation": set()}
    skip = {p.resolve() for p in given}
    if validation is not None and Path(validation).resolve() == path.resolve():
        folders = []
    else:
        folders = _dump_folders(path)
    for folder in folders:
        told = {}
        for file in dump_files(folder):
            if file.resolve() in skip or not settled(file):
                continue
            key = str(file.relative_to(path)) if file != path else file.name
            if validation is not None:
                told[file] = "rollout"
            elif key in kinds:
                told[file] = kinds[key]
            else:
                told[file] = dump_kind(file)
                if told[file] in ("rollout", "validation"):
                    kinds[key] = told[file]
        # a dump whose first line cannot be read is of its folder's kind, so that reading it names the fault
        usual = "validation" if "validation" in told.values() and "rollout" not in told.values() else "rollout"
        for file, kind in told.items():
            kind = usual if kind == "unreadable" else kind
            if kind == "validation":
                found.append(file)
                holders["validation"].add(file.parent)
            elif kind == "rollout":
                rollouts.append(file)
                holders["rollout"].add(file.parent)
    for kind, where in holders.items():
        if len(where) > 1:
            names = ", ".join(sorted(p.name for p in where))
            raise ImportFault(
                f"{path.name}: verl {kind} dumps in several folders ({names}): give one run's rollout_data_dir as the "
                "path and its validation_data_dir as validation_path"
            )
    found = given or sorted(found, key=lambda p: int(p.stem) if p.stem.isdigit() else 0)
    rollouts = sorted(rollouts, key=lambda p: int(p.stem) if p.stem.isdigit() else 0)
    return rollouts, found, next(iter(holders["rollout"]), None)


def convert(
    path: str | Path,
    *,
    validation: str | Path | None = None,
    norm_by_std: bool = True,
    reward_names: list[str] | None = None,
    run_reward_names: list[str] | None = None,
    skip: set[str] = frozenset(),
    settle_s: float | None = None,
    metrics_file: Path | None = None,
    state: dict | None = None,
) -> Converted:
    """The rollout dumps under ``path`` as rollouts events, with each step's mean score and rewards as metrics, and
    the validation dumps (``validation``, else those found under ``path``: find_dumps) as periodic evaluations.
    ``reward_names``: the reward-info keys that are reward functions (default: those holding numbers on every line);
    ``run_reward_names``: the run's, when it exists already (watch mode: a validation's rewards follow them);
    ``skip``: dumps already imported (watch mode; a validation dump as ``validation/{step}.jsonl``); ``settle_s``:
    leave a dump for later while verl may still be writing it (modified within that many seconds); ``metrics_file``:
    verl's file logger (``trainer.logger`` with ``file``: ``{"step", "data"}`` lines), else a ``*.jsonl`` beside the
    dumps that has its shape; ``state``: what an earlier read of a watched folder left (the dumps' kinds, how far
    the log was read), so that only what was appended since is read; the next read's is in ``Converted.watch_state``."""
    state = state or {}
    kinds = dict(state.get("kinds") or {})
    rollout_files, validation_files, rollout_dir = find_dumps(path, validation, settle_s, kinds)
    if not rollout_files and not validation_files and not skip and settle_s is None:
        raise ImportFault(
            f"{Path(path).name}: no verl dumps ({{step}}.jsonl, as verl writes to rollout_data_dir and "
            "validation_data_dir)"
        )
    files = [f for f in rollout_files if f.name not in skip]
    validation_files = [f for f in validation_files if VALIDATION + f.name not in skip]
    out = Converted(source="verl", every=1)
    names = reward_names
    for file in files:
        lines = _read(file)
        if lines is None:
            out.files.append(file.name)
            continue
        try:
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
        metrics_ = reward_means(event)
        if scores:
            metrics_ |= {"critic/score/mean": sum(scores) / len(scores), "reward": sum(scores) / len(scores)}
        out.events += [event, {"type": "metrics", "step": event["step"], "max_steps": 0, "metrics": metrics_}]
        out.files.append(file.name)
    for file in validation_files:
        lines = _read(file, validation=True)
        if not lines:
            continue  # nothing yet: read it again next time
        if names is None:
            names = run_reward_names if run_reward_names is not None else validation_reward_keys(lines)
        out.events.append(validation_event(file, lines, names))
        out.files.append(VALIDATION + file.name)
    out.reward_names = names or []
    offset = state.get("log_offset")  # [the log's path, bytes read, lines read]
    if metrics_file:
        log = Path(metrics_file)
    elif offset:
        log = Path(offset[0])
    else:
        log = find_metrics_file(path) or (find_metrics_file(rollout_dir) if rollout_dir else None)
    if log is not None:
        at = offset[1:] if offset and offset[0] == str(log) else (0, 0)
        out.log_metrics, read_to = read_metrics(log, *at)
        out.events += out.log_metrics
        out.watch_state["log_offset"] = [str(log), *read_to]
    if settle_s is not None:
        out.watch_state["kinds"] = kinds
    out.events.sort(key=lambda e: (e["step"], e["type"] != "rollouts"))
    if out.advantage_computed:
        out.notes.append(
            "advantages computed by grpo-web from the scores with verl's GRPO estimator "
            f"(norm_adv_by_std_in_grpo={str(norm_by_std).lower()}, epsilon 1e-6): verl's dump holds none"
        )
    if not out.length_known and out.rollout_steps:
        out.notes.append("verl's dump holds no token counts: lengths are 0")
    if out.evaluation_steps:
        out.notes.append(VALIDATION_NOTE)
    return out


def _read(file: Path, *, validation: bool = False) -> list[dict] | None:
    """One dump's lines, checked; None for an empty dump. ImportFault names the file (a validation dump with its
    folder: a rollout dump of the same step has its name) and the line."""
    where = f"{file.parent.name}/" if validation else ""
    try:
        with open_file(file) as fh:
            size = fh.seek(0, 2)
            if size > MAX_FILE_BYTES:
                raise ImportFault(f"{where}{file.name}: {size} bytes, more than {MAX_FILE_BYTES} a dump may hold")
            fh.seek(0)
            lines = read_dump(file, fh)
    except DumpError as exc:
        raise ImportFault(f"{where}{exc}") from None
    return lines or None


def validation_reward_keys(lines: list[dict]) -> list[str]:
    """A validation dump's reward functions: its numeric reward-info keys, less verl's copy of the score."""
    return [k for k in reward_keys(lines) if k != "reward"]


def _measure(value) -> float | None:
    """verl's acc (a number, or true/false as its rule-based scorers return it) or score as a number."""
    return float(value) if isinstance(value, bool) else number(value)


def validation_event(file: Path, lines: list[dict], reward_names: list[str]) -> dict:
    """One of verl's validation dumps as a periodic "eval" event (the shape workers.training.evaluate writes): the
    completions of each prompt text are its samples (verl repeats each validation prompt val_kwargs.n times); a
    completion is correct when verl's ``acc`` is at least THRESHOLD, else its ``score`` (verl's core validation
    metric is acc where the reward function returns one, else the reward); its answer is verl's ``pred``. Its
    figures come from grpo_web_protocol.scoring.metrics, as the app's own evaluations'; greedy is null (no
    greedy completion), and so are maj@k and the answer rate without ``pred``."""
    where = f"{file.parent.name}/{file.name}"
    try:
        step = dump_step(file, lines)
    except DumpError as exc:
        raise ImportFault(f"{file.parent.name}/{exc}") from None
    if len(lines) > MAX_ROWS:
        raise ImportFault(f"{where}: {len(lines)} completions, more than the {MAX_ROWS} one evaluation may hold")
    has_acc = any("acc" in row for row in lines)
    has_pred = any("pred" in row for row in lines)
    skip = {*NOT_REWARDS, *reward_names, "reward"}
    prompts: dict[str, int] = {}
    counts: dict[int, int] = {}
    rows = []
    for number_, row in enumerate(lines, 1):
        at = f"{where}: line {number_}"
        if has_acc:
            if "acc" not in row:
                raise ImportFault(f"{at}: no 'acc' (other lines of the dump have it)")
            value = row["acc"]
            if value is not None and not isinstance(value, bool | int | float):
                raise ImportFault(f"{at}: 'acc' is {str(value)[:40]!r}, not a number or true/false")
        else:
            value = row["score"]
        measure = _measure(value)
        index = prompts.setdefault(row["input"], len(prompts))
        sample = counts.get(index, 0)
        if sample >= MAX_SMALL:
            raise ImportFault(f"{at}: more than {MAX_SMALL} completions of one prompt")
        counts[index] = sample + 1
        pred = row.get("pred")
        columns = {k: v for k, v in row.items() if k not in skip}
        if row.get("gts") is not None:
            columns = {"gts": row["gts"], **columns}
        length = row.get(LENGTH_KEY)
        rows.append(
            {
                "prompt_index": index,
                "sample": sample,
                "greedy": False,
                "prompt": row["input"],
                "completion": row["output"],
                "rewards": [_measure(row.get(name)) for name in reward_names],
                "reward": number(row["score"]),
                "correct": measure is not None and measure >= THRESHOLD,
                "answer": None if pred is None or isinstance(pred, dict | list) else str(pred)[:200],
                "length": int(length) if isinstance(length, int | float) and not isinstance(length, bool) else 0,
                "truncated": bool(row.get(TRUNCATED_KEY)),
                "columns": columns,
            }
        )
    k = max(counts.values())
    figures = metrics(rows, k)
    figures["greedy"] = figures["reward_greedy"] = None
    if not has_pred:
        figures["maj@k"] = figures["answer_rate"] = None
    return {
        "type": "eval",
        "step": step,
        "kind": "periodic",
        "label": f"step {step}",
        "source": "verl validation",
        "k": k,
        "solved_by": "acc" if has_acc else TOTAL,
        "threshold": THRESHOLD,
        "prompts": len(prompts),
        "metrics": figures,
        "seconds": None,
        "generator": "verl",
        "imported_from": f"verl's validation dump {where}"[:500],
        "rows": rows,
    }


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
        try:
            with open_file(candidate) as fh:
                first = fh.readline(1024 * 1024)
        except ImportFault:
            continue  # not read: a link, a hard link
        if _log_line(first) is not None:
            return candidate
    return None


def read_metrics(path: Path, offset: int = 0, line: int = 0) -> tuple[list[dict], tuple[int, int]]:
    """verl's file logger as "metrics" events (TRL's names beside verl's: grpo_web_protocol.verl_dump.metrics_event),
    from byte ``offset`` (line ``line``) on, and how far it was read (bytes, lines): a last line without its newline
    is left for the next read. A log shorter than ``offset`` was written anew: read from its start."""
    events = []
    with open_file(path) as fh:
        size = fh.seek(0, 2)
        if size < offset:
            offset = line = 0
        if size - offset > MAX_LOG_BYTES:
            raise ImportFault(f"{path.name}: more than {MAX_LOG_BYTES} bytes")
        fh.seek(offset)
        while raw := fh.readline(MAX_LINE_BYTES + 2):
            if not raw.endswith(b"\n"):
                if len(raw) > MAX_LINE_BYTES:
                    raise ImportFault(f"{path.name}: line {line + 1}: more than {MAX_LINE_BYTES} bytes")
                break  # verl is writing it: the next read has it
            offset += len(raw)
            line += 1
            if not raw.strip():
                continue
            parsed = _log_line(raw)
            step = parsed.get("step") if parsed else None
            if parsed is None or isinstance(step, bool) or not isinstance(step, int) or step < 0:
                raise ImportFault(
                    f'{path.name}: line {line}: not a verl file-logger line ({{"step": N, "data": {{...}}}})'
                )
            events.append(metrics_event(parsed, 0))
    return events, (offset, line)
