"""What an event log line from outside must be before it is stored: the checks of every event a client or an
importer sends, naming the line and the key that is wrong. Ingest (runs.rollouts.ingest) trusts what it reads,
as the training program wrote it; what comes from elsewhere passes here first."""

from __future__ import annotations

import math

from workers.training.protocol.events import parse_event

EVENT_TYPES = ("rollouts", "metrics", "checkpoint")
MAX_INT = 2**31 - 1  # the database's positive integer columns
MAX_ROWS = 100_000  # rows in one generation batch


class EventRefused(ValueError):
    """An event that cannot be stored; the message names the line and the key."""


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT


def _number(value, *, none=True) -> bool:
    if value is None:
        return none
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(value) -> bool:
    """A prompt or completion: a string, or TRL's conversational messages (a list of dicts)."""
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(m, dict) for m in value))


ROW_CHECKS = {
    "index": (_int, "an integer from 0"),
    "group": (_int, "an integer from 0"),
    "prompt": (_text, "a string or a list of messages"),
    "completion": (_text, "a string or a list of messages"),
    "rewards": (lambda v: isinstance(v, list) and all(_number(r) for r in v), "a list of numbers or nulls"),
    "reward": (_number, "a number or null"),
    "advantage": (lambda v: _number(v, none=False), "a finite number"),
    "length": (_int, "an integer from 0"),
    "truncated": (lambda v: isinstance(v, bool), "true or false"),
}


def _finite(value) -> bool:
    t = type(value)
    return (t is float and math.isfinite(value)) or t is int


def row_is_good(row) -> bool:
    """ROW_CHECKS and the columns' check at once, for a row as json.loads makes it (exact types: no subclasses)."""
    if type(row) is not dict:
        return False
    try:
        index, group, length = row["index"], row["group"], row["length"]
        prompt, completion, rewards = row["prompt"], row["completion"], row["rewards"]
        reward, advantage, truncated = row["reward"], row["advantage"], row["truncated"]
    except KeyError:
        return False
    columns = row.get("columns")
    return (
        type(index) is int
        and type(group) is int
        and type(length) is int
        and 0 <= index <= MAX_INT
        and 0 <= group <= MAX_INT
        and 0 <= length <= MAX_INT
        and (type(prompt) is str or _text(prompt))
        and (type(completion) is str or _text(completion))
        and type(rewards) is list
        and all(r is None or _finite(r) for r in rewards)
        and (reward is None or _finite(reward))
        and _finite(advantage)
        and type(truncated) is bool
        and (columns is None or type(columns) is dict)
    )


def event_problem(event, where: str, allow_resume: bool = False, allow_eval: bool = False) -> str | None:
    """Why ``event`` (from ``where``, e.g. "line 3") cannot be stored; None when it can. ``allow_resume``: a client's
    "resume" marker (its script runs again from the checkpoint at ``step``) is allowed; ``allow_eval``: a periodic
    evaluation (an importer's, read from verl's validation dump) is allowed."""
    if not isinstance(event, dict):
        return f"{where}: an event is a JSON object, not {type(event).__name__}"
    kind = event.get("type")
    if allow_resume and kind == "resume":
        return None if _int(event.get("step")) else f"{where}: step: must be an integer from 0"
    if allow_eval and kind == "eval":
        return eval_problem(event, where)
    if kind not in EVENT_TYPES:
        return f"{where}: type: must be one of {', '.join(EVENT_TYPES)}, not {str(kind)[:40]!r}"
    if not _int(event.get("step")):
        return f"{where}: step: must be an integer from 0"
    if "ts" in event and not _number(event["ts"], none=False):
        return f"{where}: ts: must be a number (seconds since the epoch)"
    if kind == "metrics":
        metrics = event.get("metrics")
        if not isinstance(metrics, dict):
            return f"{where}: metrics: must be an object"
        for key, value in metrics.items():
            if len(key) > 200 or "\x00" in key:
                return f"{where}: metrics: a name is at most 200 characters, without NUL"
            if not _number(value) and not (isinstance(value, str) and len(value) <= 1000 and "\x00" not in value):
                return f"{where}: metrics.{key[:60]}: must be a number, null or a short string"
        if "max_steps" in event and event["max_steps"] is not None and not _int(event["max_steps"]):
            return f"{where}: max_steps: must be an integer from 0"
    elif kind == "checkpoint":
        if not isinstance(event.get("path", ""), str):
            return f"{where}: path: must be a string"
    else:
        return rollouts_problem(event, where)
    return None


def rollouts_problem(event: dict, where: str) -> str | None:
    rows = event.get("rows")
    if not isinstance(rows, list):
        return f"{where}: rows: must be a list"
    if len(rows) > MAX_ROWS:
        return f"{where}: rows: at most {MAX_ROWS} rows in one batch, not {len(rows)}"
    names = event.get("reward_names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return f"{where}: reward_names: must be a list of strings"
    for i, row in enumerate(rows):
        if row_is_good(row):
            continue  # the common case, checked in one go; the loop below names what is wrong
        fault = _row_fault(where, i, row, ROW_CHECKS)
        if fault:
            return fault
        if "columns" in row and row["columns"] is not None and not isinstance(row["columns"], dict):
            return f"{where}: rows[{i}].columns: must be an object"
    return None


MAX_SMALL = 32767  # the database's positive small integer columns (an evaluation's k, a sample's number)
EVAL_ROW_CHECKS = {
    "prompt_index": (_int, "an integer from 0"),
    "sample": (lambda v: _int(v) and v <= MAX_SMALL, f"an integer from 0 to {MAX_SMALL}"),
    "greedy": (lambda v: isinstance(v, bool), "true or false"),
    "prompt": (_text, "a string or a list of messages"),
    "completion": (_text, "a string or a list of messages"),
    "rewards": (lambda v: isinstance(v, list) and all(_number(r) for r in v), "a list of numbers or nulls"),
    "reward": (_number, "a number or null"),
    "correct": (lambda v: isinstance(v, bool), "true or false"),
    "answer": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "length": (_int, "an integer from 0"),
    "truncated": (lambda v: isinstance(v, bool), "true or false"),
    "columns": (lambda v: v is None or isinstance(v, dict), "an object"),
}


def eval_problem(event: dict, where: str) -> str | None:
    """Why a periodic evaluation ("eval": its figures and its scored completions, as workers.training.evaluate
    writes it) cannot be stored; None when it can."""
    if event.get("kind") != "periodic":
        return f"{where}: kind: an imported evaluation is periodic"
    if not _int(event.get("step")):
        return f"{where}: step: must be an integer from 0"
    if not (_int(event.get("k")) and 1 <= event["k"] <= MAX_SMALL):
        return f"{where}: k: must be an integer from 1 to {MAX_SMALL}"
    if not _int(event.get("prompts")):
        return f"{where}: prompts: must be an integer from 0"
    for key, limit in (("solved_by", 200), ("label", 200), ("generator", 16), ("imported_from", 500)):
        value = event.get(key, "")
        if not isinstance(value, str) or len(value) > limit or "\x00" in value:
            return f"{where}: {key}: must be a string of at most {limit} characters"
    if not _number(event.get("threshold"), none=False):
        return f"{where}: threshold: must be a number"
    if not _number(event.get("seconds")):
        return f"{where}: seconds: must be a number or null"
    metrics = event.get("metrics")
    if not isinstance(metrics, dict) or not all(
        isinstance(k, str) and len(k) <= 200 and _number(v) for k, v in metrics.items()
    ):
        return f"{where}: metrics: must map names to numbers or nulls"
    rows = event.get("rows")
    if not isinstance(rows, list):
        return f"{where}: rows: must be a list"
    if len(rows) > MAX_ROWS:
        return f"{where}: rows: at most {MAX_ROWS} completions in one evaluation, not {len(rows)}"
    for i, row in enumerate(rows):
        fault = _row_fault(where, i, row, EVAL_ROW_CHECKS)
        if fault:
            return fault
    return None


def _row_fault(where: str, i: int, row, checks: dict) -> str | None:
    """What is wrong with row ``i`` by ``checks`` (key: (check, what it must be)), naming the key; None when nothing."""
    if not isinstance(row, dict):
        return f"{where}: rows[{i}]: must be an object"
    for key, (check, wanted) in checks.items():
        if key not in row:
            return f"{where}: rows[{i}].{key}: missing"
        if not check(row[key]):
            return f"{where}: rows[{i}].{key}: must be {wanted}"
    return None


def parse_line(line: bytes, where: str) -> dict:
    """One line of a client's batch as an event, checked (EventRefused names what is wrong). Parsed as the event log's
    reader parses it (orjson, lone surrogates made U+FFFD), refusing NaN and Infinity: the event is stored as parsed
    here, not read again."""
    try:
        event = parse_event(line, strict=True)
    except (ValueError, UnicodeDecodeError) as exc:  # orjson's JSONDecodeError is a ValueError
        raise EventRefused(f"{where}: not JSON ({str(exc)[:120]})") from None
    problem = event_problem(event, where, allow_resume=True)
    if problem:
        raise EventRefused(problem)
    return event
