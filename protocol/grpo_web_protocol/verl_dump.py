"""verl's rollout and validation dumps (``trainer.rollout_data_dir``, ``trainer.validation_data_dir``) as "rollouts"
events. No Django, no verl import here: the training program follows its own verl run with it
(workers.training.verl_data), and the app imports the dumps of verl runs trained elsewhere with it (runs.attach).

verl writes one ``{step}.jsonl`` per step (RayPPOTrainer._write_generations): a line per completion with ``input``
(the decoded prompt), ``output`` (the decoded completion), ``gts`` (the ground truth), ``score`` (the summed token
reward), ``step``, and every reward-extra-info key of the step (what the reward function returned beside the score,
when it returned a dict). It writes no group and no advantage: a group is verl's ``uid`` where the dump has one (a
reward function or grpo-web's capture added it), else the completions of the same prompt text (verl repeats each
prompt ``rollout.n`` times); the advantage, where the dump lacks one, is recomputed from the scores by verl's GRPO
estimator (``grpo_advantages``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import BinaryIO

import orjson

# verl's metric names -> the TRL names the run pages chart; verl's own names are kept as well
METRIC_ALIASES = {
    "critic/score/mean": "reward",
    "critic/rewards/mean": "reward",
    "response_length/mean": "completions/mean_length",
    "response_length/max": "completions/max_length",
    "response_length/min": "completions/min_length",
    "response_length/clip_ratio": "completions/clipped_ratio",
    "actor/pg_loss": "loss",
    "actor/kl_loss": "kl",
    "actor/entropy": "entropy",
    "actor/grad_norm": "grad_norm",
    "actor/lr": "learning_rate",
    "timing_s/step": "timing/step_s",
    "timing_s/gen": "timing/generation_s",
    "timing_s/reward": "timing/reward_s",
}

# what verl writes on every line
BASE_KEYS = ("input", "output", "gts", "score", "step")
# keys grpo-web's capture adds to verl's dump (workers.training.verl_run.capture_extras)
GROUP_KEY, ADVANTAGE_KEY, LENGTH_KEY, TRUNCATED_KEY, COLUMNS_KEY = (
    "uid",
    "grpo_web/advantage",
    "grpo_web/length",
    "grpo_web/truncated",
    "grpo_web/columns",
)
CAPTURE_KEYS = (ADVANTAGE_KEY, LENGTH_KEY, TRUNCATED_KEY, COLUMNS_KEY)
NOT_REWARDS = {*BASE_KEYS, GROUP_KEY, *CAPTURE_KEYS, "request_id", "data_source"}
MAX_LINE_BYTES = 16 * 1024 * 1024  # one completion with its prompt: far past any real one
MAX_ROWS = 1_000_000  # completions in one step's dump
EPSILON = 1e-6  # verl's compute_grpo_outcome_advantage default


class DumpError(ValueError):
    """A dump that is not verl's format; the message names the file and the line."""


def number(value):
    """A score as a float; None for verl's NaN (a reward function's None) and non-numbers."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _loads(line: bytes):
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)  # verl's json.dumps writes NaN for a function's None, which orjson refuses


def read_dump(path: str | Path, data: bytes | BinaryIO | None = None) -> list[dict]:
    """The lines of one dump, checked: every line a JSON object with verl's keys, ``score`` a number, ``step`` a
    whole number. ``data``: the file's bytes, already read, or the file opened; else the file is opened by its path.
    Read a line at a time, each at most MAX_LINE_BYTES (a dump of one endless line costs no more). DumpError names
    the file and line otherwise."""
    path = Path(path)
    if data is None:
        with open(path, "rb") as fh:
            return read_dump(path, fh)
    lines = []
    for number_, line in enumerate(_lines(data), 1):
        where = f"{path.name}: line {number_}"
        if len(line) > MAX_LINE_BYTES:
            raise DumpError(f"{where}: more than the {MAX_LINE_BYTES} bytes a line may hold")
        if not line.strip():
            continue
        if len(lines) >= MAX_ROWS:
            raise DumpError(f"{where}: more than {MAX_ROWS} completions in one step's dump")
        try:
            row = _loads(line)
        except (ValueError, RecursionError) as exc:
            raise DumpError(f"{where}: not JSON ({str(exc).splitlines()[0][:120]})") from None
        if not isinstance(row, dict):
            raise DumpError(f"{where}: a {type(row).__name__}, not a JSON object (verl writes one object a line)")
        missing = [k for k in ("input", "output", "score") if k not in row]
        if missing:
            raise DumpError(f"{where}: no {', '.join(repr(k) for k in missing)} (verl's dump has input, output, score)")
        for key in ("input", "output"):
            if not isinstance(row[key], str):
                raise DumpError(f"{where}: {key!r} is a {type(row[key]).__name__}, not text")
        if row["score"] is not None and (isinstance(row["score"], bool) or not isinstance(row["score"], int | float)):
            raise DumpError(f"{where}: 'score' is {str(row['score'])[:40]!r}, not a number")
        step = row.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
            raise DumpError(f"{where}: 'step' is {str(step)[:40]!r}, not a whole number")
        lines.append(row)
    return lines


def _lines(data: bytes | BinaryIO):
    """The lines of bytes or of an open file, without their newline; a line longer than MAX_LINE_BYTES comes cut
    to MAX_LINE_BYTES + 1 bytes (the reader refuses it), and reading stops there."""
    if isinstance(data, bytes):
        yield from data.splitlines()
        return
    while line := data.readline(MAX_LINE_BYTES + 2):
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line
        if len(line) > MAX_LINE_BYTES:
            return


def dump_step(path: str | Path, lines: list[dict]) -> int:
    """The step a dump holds: its lines' ``step``, else the file's name (``{step}.jsonl``)."""
    steps = {row["step"] for row in lines if row.get("step") is not None}
    if len(steps) > 1:
        raise DumpError(f"{Path(path).name}: lines of several steps ({', '.join(map(str, sorted(steps)[:5]))})")
    if steps:
        return steps.pop()
    stem = Path(path).stem
    if not stem.isdigit():
        raise DumpError(f"{Path(path).name}: no 'step' on its lines and its name is not {{step}}.jsonl")
    return int(stem)


def grpo_advantages(
    scores: list[float | None], groups: list[int], *, norm_by_std: bool = True, epsilon: float = EPSILON
) -> list[float]:
    """verl's GRPO advantage (core_algos.compute_grpo_outcome_advantage): each score less its group's mean, over the
    group's standard deviation (torch.std's, with Bessel's correction) plus epsilon; a group of one has mean 0 and
    std 1. A missing score counts as 0, as verl's summed token rewards would have it."""
    values = [0.0 if s is None else s for s in scores]
    members: dict[int, list[float]] = {}
    for value, group in zip(values, groups):
        members.setdefault(group, []).append(value)
    stats = {}
    for group, vals in members.items():
        if len(vals) == 1:
            stats[group] = (0.0, 1.0)
        else:
            mean = sum(vals) / len(vals)
            stats[group] = (mean, math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)))
    out = []
    for value, group in zip(values, groups):
        mean, std = stats[group]
        out.append((value - mean) / (std + epsilon) if norm_by_std else value - mean)
    return out


def reward_keys(lines: list[dict]) -> list[str]:
    """The reward-extra-info keys that hold numbers (or NaN/None) on every line: verl's per-function rewards."""
    keys: dict[str, None] = {}
    for row in lines:
        for key in row:
            if key not in NOT_REWARDS:
                keys.setdefault(key)
    return [k for k in keys if all(k in row and _numeric(row[k]) for row in lines)]


def _numeric(value) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def dump_event(
    path: str | Path,
    lines: list[dict],
    *,
    reward_keys_: list[str] | None = None,
    reward_names: list[str] | None = None,
    norm_by_std: bool = True,
) -> tuple[dict, bool]:
    """One dump's lines as a "rollouts" event, and whether its advantages were recomputed (True) rather than read
    from the dump (grpo-web's capture stores the advantage verl trained with). ``reward_keys_``: the keys that hold
    each reward function's value (default: the numeric reward-extra-info keys), named ``reward_names`` in the event
    (default: the keys)."""
    step = dump_step(path, lines)
    keys = reward_keys(lines) if reward_keys_ is None else reward_keys_
    names = list(keys) if reward_names is None else reward_names
    ids: dict[str, int] = {}
    groups = []
    for row in lines:
        uid = row.get(GROUP_KEY)
        key = f"uid:{uid}" if uid is not None else f"input:{row['input']}"
        groups.append(ids.setdefault(key, len(ids)))
    scores = [number(row["score"]) for row in lines]
    measured = bool(lines) and all(ADVANTAGE_KEY in row for row in lines)
    advantages = (
        [number(row[ADVANTAGE_KEY]) or 0.0 for row in lines]
        if measured
        else grpo_advantages(scores, groups, norm_by_std=norm_by_std)
    )
    skip = NOT_REWARDS | set(keys)
    rows = []
    for index, row in enumerate(lines):
        captured = row.get(COLUMNS_KEY)
        if isinstance(captured, str):
            try:
                columns = json.loads(captured)
            except ValueError:
                raise DumpError(f"{Path(path).name}: line {index + 1}: {COLUMNS_KEY!r} is not JSON") from None
            columns = columns if isinstance(columns, dict) else {}
        else:
            columns = {k: v for k, v in row.items() if k not in skip}
            if row.get("gts") is not None:
                columns = {"gts": row["gts"], **columns}
        length = row.get(LENGTH_KEY)
        rows.append(
            {
                "index": index,
                "group": groups[index],
                "prompt": row["input"],
                "completion": row["output"],
                "rewards": [number(row.get(k)) for k in keys],
                "reward": scores[index],
                "advantage": advantages[index],
                "length": int(length) if isinstance(length, int | float) and not isinstance(length, bool) else 0,
                "truncated": bool(row.get(TRUNCATED_KEY)),
                "columns": columns,
            }
        )
    sizes: dict[int, int] = {}
    for group in groups:
        sizes[group] = sizes.get(group, 0) + 1
    event = {
        "type": "rollouts",
        "step": step,
        "num_generations": max(sizes.values(), default=1),
        "reward_names": names,
        "rows": rows,
    }
    return event, not measured


def reward_means(event: dict) -> dict:
    """rewards/<name>/mean per step from a rollouts event (TRL logs them; verl's metrics do not have them)."""
    out = {}
    for k, name in enumerate(event["reward_names"]):
        values = [r["rewards"][k] for r in event["rows"] if r["rewards"][k] is not None]
        if values:
            out[f"rewards/{name}/mean"] = sum(values) / len(values)
    return out


def metrics_event(line: dict, max_steps: int) -> dict:
    """A line of verl's file logger ({"step", "data"}) as a "metrics" event, TRL's names beside verl's."""
    data = {
        k: number(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in line["data"].items()
    }
    data |= {alias: data[name] for name, alias in METRIC_ALIASES.items() if name in data and alias not in data}
    return {"type": "metrics", "step": int(line["step"]), "max_steps": max_steps, "metrics": data}
