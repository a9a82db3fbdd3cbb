"""What an event log line from outside must be before it is stored: the checks of every event a client or an
importer sends, naming the line and the key that is wrong. Ingest (runs.rollouts.ingest) trusts what it reads,
as the training program wrote it; what comes from elsewhere passes here first."""

from __future__ import annotations

import math

from django.conf import settings
from grpo_web_protocol.events import parse_event

EVENT_TYPES = ("rollouts", "metrics", "checkpoint")
MAX_INT = 2**31 - 1  # the database's positive integer columns
MAX_ROWS = 100_000  # rows in one generation batch
# metric names in one metrics event: TRL's own few dozen, and a sandboxed reward function may log up to 256 of its own
# (rewards.sandbox.replies.MAX_RUN_LOG_NAMES); every name becomes a key of the step's stored metrics
MAX_METRIC_NAMES = 1024
# distinct metric names one run may hold, however they arrive (attach, every importer): a name is a chart, a column of
# the exports and a key of every step's stored metrics. Room for verl's few hundred, TRL's few dozen and a sandboxed
# function's 256 each (the sandbox caps those per function; this caps the run)
MAX_RUN_METRIC_NAMES = 2048


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
    limit = settings.GRPO_MAX_NESTING
    for key, value in event.items():
        if key != "rows" and deeper_than(value, limit):
            return f"{where}: {str(key)[:60]}: nested more than {limit} levels deep (GRPO_MAX_NESTING)"
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
        if len(metrics) > MAX_METRIC_NAMES:
            return f"{where}: metrics: at most {MAX_METRIC_NAMES} names in one event, not {len(metrics)}"
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
    limit = settings.GRPO_MAX_NESTING
    for i, row in enumerate(rows):
        if not row_is_good(row):  # the common case is checked in one go; _row_fault names what is wrong
            fault = _row_fault(where, i, row, ROW_CHECKS)
            if fault:
                return fault
            if "columns" in row and row["columns"] is not None and not isinstance(row["columns"], dict):
                return f"{where}: rows[{i}].columns: must be an object"
        for key, value in row.items():
            # a row's columns are its dataset row's: each as deep as a dataset's value may be
            if type(value) in (list, dict) and deeper_than(value, limit + (key == "columns")):
                return f"{where}: rows[{i}].{str(key)[:60]}: nested more than {limit} levels deep (GRPO_MAX_NESTING)"
    seen: dict[int, int] = {}
    for i, row in enumerate(rows):
        first = seen.setdefault(row["index"], i)
        if first != i:
            return f"{where}: rows[{i}].index: {row['index']} again (rows[{first}] has it): each row's index is its own"
    return None


def deeper_than(value, limit: int) -> bool:
    """Whether ``value`` (as JSON parses) nests lists and objects more than ``limit`` levels deep (a list of messages
    is 2 deep). Walked without recursion: no depth reaches Python's own limit."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item if type(item) is list else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if type(child) in (list, dict))
    return False


def shape_problem(event: dict, where: str, *, reward_names: list[str], num_generations: int | None) -> str | None:
    """Why a checked rollouts event does not fit its run (None when it does): the run's reward functions (each row
    has one reward a function, in the run's order) and its group size (``num_generations``: a row's group is its
    index // G; unknown, the event's own)."""
    names = event.get("reward_names", reward_names)
    if names != reward_names:
        return f"{where}: reward_names: {str(names)[:200]}, not this run's {str(reward_names)[:200]}"
    G = event.get("num_generations", num_generations)
    if G is not None and not (_int(G) and G >= 1):
        return f"{where}: num_generations: must be an integer from 1"
    if num_generations and G != num_generations:
        return f"{where}: num_generations: {G}, not this run's {num_generations}"
    for i, row in enumerate(event["rows"]):
        index, group, n = row["index"], row["group"], len(row["rewards"])
        if n != len(reward_names):
            return (
                f"{where}: rows[{i}].rewards: {n} values for this run's {len(reward_names)} reward functions "
                f"({', '.join(reward_names)[:200] or 'none'})"
            )
        if index >= MAX_ROWS:
            return f"{where}: rows[{i}].index: {index}, past the {MAX_ROWS} rows a generation batch may hold"
        if G and group != index // G:
            return f"{where}: rows[{i}].group: {group}, not index // num_generations ({index} // {G} = {index // G})"
        if not G and group > index:
            return f"{where}: rows[{i}].group: {group}, past the row's index ({index})"
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
    reader parses it (orjson, lone surrogates made U+FFFD), refusing NaN, Infinity and numbers past a double's range
    (1e400), and values nested past GRPO_MAX_NESTING: the event is stored as parsed here, not read again."""
    try:
        event = parse_event(line, strict=True)
    except (ValueError, UnicodeDecodeError) as exc:  # orjson's JSONDecodeError is a ValueError
        raise EventRefused(f"{where}: not JSON ({str(exc)[:120]})") from None
    except RecursionError:  # deeper than orjson's 1,024 levels, and than json's reader can follow
        limit = settings.GRPO_MAX_NESTING
        raise EventRefused(f"{where}: nested more than {limit} levels deep (GRPO_MAX_NESTING)") from None
    problem = event_problem(event, where, allow_resume=True)
    if problem:
        raise EventRefused(problem)
    return event
