"""What the host takes from a worker's replies, checked strictly: the bytes decoded within a bound on the objects they
become, the isolation report against what the kernel shows, and every field of a start message, a call's reply and
an error, by type and size. Anything an honest worker could not have sent is WorkerLost (a ProtocolError).

No Django; nothing here trusts the worker: once user code has run in it, a reply is whatever bytes it chose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import msgpack

from rewards import step_scores
from rewards.sandbox.errors import SandboxError, SandboxUnavailable, malformed

MAX_REPLY_ITEMS = 2_000_000  # lists + dict pairs one reply may decode into: a 64 MiB reply must not become 4 GB
MAX_LOG_VALUES = 100_000  # log_extra values plus log_metric records one call may return
MAX_LOG_CHARS = 8 << 20  # characters of log_extra strings and of column / metric names one call may return
# TRL keeps every log_extra column it is ever given (a deque per name, for the whole run) and writes every metric
# name into each logged step: what grows the training process and the metrics table is the number of names.
MAX_LOG_NAMES = 64  # distinct log_extra columns, and distinct log_metric names, one call may return (each)
MAX_LOG_NAME_CHARS = 200  # characters of one column or metric name: each is a key in every logged step's metrics
MAX_RUN_LOG_NAMES = 256  # distinct columns, and distinct metric names, one Sandbox (a run's function) may ever log
MAX_REPLY_MAP = 64  # keys of any one map in a reply: an honest worker's have at most 8
# what an honest call reply decodes into, besides its rewards: log_extra values, metric records ([name, value]:
# three objects each), the columns' records, the keys and the error
CALL_REPLY_ITEMS = 3 * MAX_LOG_VALUES + 3 * MAX_LOG_NAMES + 64
MAX_ERROR_MESSAGE, MAX_ERROR_TRACEBACK, MAX_KIND = 4000, 8000, 200
TOOL_REPLY_ITEMS = 16  # a tool's or environment's reply: {"id", "ok", "result"}, or an error of four fields
# Kinds only this side raises: one arriving from the worker is the user's own exception class of that name.
HOST_KINDS = frozenset(
    {
        "SandboxError",
        "SandboxUnavailable",
        "Timeout",
        "Crash",
        "ProtocolError",
        "ScratchQuota",
        "InvalidInput",
        "SourceTooLarge",
    }
)
CALL_REPLY_KEYS = frozenset({"id", "ok", "stdout", "truncated", "rewards", "extra", "metrics", "error"})
ISOLATION_TYPES = {
    "uid": (int,),
    "landlock": (str, type(None)),
    "landlock_abi": (int,),
    "seccomp": (bool,),
    "private_mounts": (bool,),
    "private_mounts_error": (str,),
    "weak": (list,),
}
NO_PRIVATE_ROOT = "no private mount root: the worker sees the host's file system (through Landlock)"


@dataclass
class CallResult:
    rewards: list[float | None]
    stdout: str
    stdout_truncated: bool
    duration_s: float
    logged_extra: dict[str, list] = field(default_factory=dict)
    logged_metrics: dict[str, list[float]] = field(default_factory=dict)

    def replay(self, log_extra=None, log_metric=None) -> None:
        """Send what the function logged to TRL's ``log_extra(column, values)`` / ``log_metric(name, value)``."""
        for column, values in self.logged_extra.items():
            if log_extra is not None:
                log_extra(column, values)
        for name, values in self.logged_metrics.items():
            for value in values if log_metric is not None else ():
                log_metric(name, value)


def decode(body: bytes, max_items: int = MAX_REPLY_ITEMS):
    """One message's msgpack, decoded into at most ``max_items`` lists and dict pairs; WorkerLost otherwise.
    msgpack checks each array's and map's length in its header, before building anything: no array longer than
    ``max_items``, no map of more than MAX_REPLY_MAP keys, no bin or ext object (an honest worker sends none)
    is built at all; the item count stops the decode once the containers built add up to more than ``max_items``."""
    budget = [max_items]

    def count(items):
        budget[0] -= len(items)
        if budget[0] < 0:
            raise ValueError(f"more than {max_items} objects")
        return items

    try:  # the C decoder nests at most 1024 deep (StackError) and recurses nowhere in this process
        return msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=False,
            list_hook=count,
            object_pairs_hook=lambda pairs: dict(count(pairs)),
            max_ext_len=0,
            max_bin_len=0,
            max_array_len=max_items,
            max_map_len=min(MAX_REPLY_MAP, max_items),
        )
    except ValueError as exc:  # ours, or msgpack's "N exceeds max_map_len(64)": numbers, nothing of the worker's
        text = type(exc).__name__ if isinstance(exc, UnicodeError) else str(exc)[:200] or type(exc).__name__
        raise malformed(f"the worker sent an unreadable reply ({text})") from None
    except Exception as exc:
        raise malformed(f"the worker sent an unreadable reply ({type(exc).__name__})") from None


def tool_reply_bytes(result_chars: int) -> int:
    """The most bytes an honest tool or environment reply takes: its result text, or an error, as UTF-8 (at most
    four bytes a character). A longer one is refused from its header, before its body is read."""
    return 4 * (result_chars + MAX_KIND + MAX_ERROR_MESSAGE + MAX_ERROR_TRACEBACK) + 1024


def isolation_report(message, *, observe: Callable[[], dict], allow_weak: bool) -> dict:
    """The worker's report of its isolation, checked against what the kernel shows of it (``observe()``); refuses a
    worker without a private mount root unless weak mode is allowed."""
    if type(message) is not dict:
        raise malformed()
    if message.get("unavailable") is True and message.keys() == {"ok", "unavailable", "error"}:
        _, text, _, tb = error_fields(message["error"])  # sent before any user code ran: its own words
        advice = (
            " Set GRPO_SANDBOX_ALLOW_WEAK=1 (or allow_weak=True) to run it with weaker isolation."
            if "PermissionError" in text and not allow_weak
            else ""
        )
        raise SandboxUnavailable(
            f"refusing to run reward code: {text}.{advice}", kind="SandboxUnavailable", traceback=tb
        )
    report = message.get("isolation")
    if (
        message.keys() != {"locked", "isolation"}
        or message["locked"] is not True
        or type(report) is not dict
        or report.keys() - ISOLATION_TYPES.keys()
        or not ISOLATION_TYPES.keys() - {"private_mounts_error"} <= report.keys()
        or any(type(report[key]) not in ISOLATION_TYPES[key] for key in report)
        or len(report["weak"]) > 20
        or any(type(w) is not str or len(w) > 1000 for w in report["weak"])
        or len(report.get("private_mounts_error", "")) > 1000
        or len(report["landlock"] or "") > 100
    ):
        raise malformed("the worker sent a malformed isolation report")
    for key, seen in observe().items():
        if seen is not None and report[key] != seen:
            raise malformed(f"the worker reported {key}={report[key]!r}; the kernel shows {seen!r}")
    weak = list(report["weak"])
    if not report["private_mounts"]:
        if not allow_weak:
            raise SandboxUnavailable(
                f"refusing to run reward code: no private mount root could be made "
                f"({report.get('private_mounts_error') or 'private mounts are off'}). Allow user namespaces or "
                "give the worker CAP_SYS_ADMIN (docs/sandbox.md), or set GRPO_SANDBOX_ALLOW_WEAK=1 to run it "
                "with the host's file system in view.",
                kind="SandboxUnavailable",
            )
        if not any(w.startswith("no private mount root") for w in weak):
            weak.append(NO_PRIVATE_ROOT)
    return {**report, "weak": weak}


def load_error(message, *, stdout_limit: int) -> SandboxError | None:
    """None when the source loaded; else its error (SyntaxError, an import error, MissingFunction...)."""
    if type(message) is not dict:
        raise malformed()
    stdout = message.get("stdout", "")
    if type(stdout) is not str or len(stdout) > stdout_limit:
        raise malformed("the worker sent a malformed start message")
    if message.get("ok") is True and message.keys() <= {"ok", "stdout"}:
        return None
    if message.get("ok") is False and message.keys() <= {"ok", "stdout", "error"}:
        return user_error(message.get("error"), stdout)
    raise malformed("the worker sent a malformed start message")


def call_reply(
    reply, n: int, *, seq: int, stdout_limit: int, max_names: int = MAX_LOG_NAMES
) -> CallResult | SandboxError:
    """A reward call's reply (to request ``seq``, for ``n`` completions) as a result, or the user's error;
    WorkerLost for anything an honest worker does not send (``max_names`` columns or metric names, at most)."""
    if type(reply) is not dict or not reply.keys() <= CALL_REPLY_KEYS:
        raise malformed()
    if type(reply.get("id")) is not int or reply["id"] != seq:
        raise malformed("the worker answered out of turn")
    stdout, truncated = reply.get("stdout"), reply.get("truncated")
    if type(stdout) is not str or type(truncated) is not bool:
        raise malformed()
    if len(stdout) > stdout_limit:
        raise malformed(f"the worker sent {len(stdout)} characters of output; the limit is {stdout_limit}")
    if reply.get("ok") is True and "error" not in reply:
        rewards = checked_rewards(reply.get("rewards"), n, stdout)
        extra, metrics = checked_logs(reply.get("extra", []), reply.get("metrics", []), max_names)
        for name, values in metrics.items():  # TRL averages each metric in a float32 tensor: NaN or 1e300 spoil it
            bad = next((v for v in values if not math.isfinite(v) or abs(v) > FLOAT32_MAX), None)
            if bad is not None:
                return SandboxError(
                    f"log_metric({name!r}, {bad}): metrics must be finite numbers that fit in float32",
                    kind="InvalidResult",
                    stdout=stdout,
                )
        return CallResult(rewards, stdout, truncated, 0.0, extra, metrics)
    if reply.get("ok") is False and not reply.keys() & {"rewards", "extra", "metrics"}:
        return user_error(reply.get("error"), stdout)
    raise malformed()


FLOAT32_MAX = 3.4028234663852886e38  # TRL gathers rewards into a float32 tensor: past this a value becomes inf


def reward_problem(value: float) -> str | None:
    """Why ``value`` cannot be a reward (a reward function's, or an environment's get_reward), or None."""
    if not math.isfinite(value):
        return "rewards must be finite numbers or None"
    if abs(value) > FLOAT32_MAX:
        return "rewards must fit in float32 (TRL's reward tensor), at most 3.4e38 in size"
    return None


def checked_rewards(values, n: int, stdout: str) -> list[float | None]:
    """Exactly ``n`` finite numbers or None; bools count as 0.0/1.0 (TRL's tensor conversion does the same).
    The worker converts and checks the function's result first, so only NaN and inf get here honestly."""
    if type(values) is not list or len(values) != n:
        raise malformed("the worker sent rewards of the wrong type or length")
    out: list[float | None] = []
    for i, v in enumerate(values):
        t = type(v)
        if v is None:
            out.append(None)
        elif t is float or t is int or t is bool:
            f = float(v)  # msgpack ints fit in 64 bits
            problem = reward_problem(f)
            if problem:
                raise SandboxError(f"rewards[{i}] is {f}; {problem}", kind="InvalidResult", stdout=stdout)
            out.append(f)
        else:
            raise malformed(f"the worker sent a {t.__name__} as rewards[{i}]")
    return out


def checked_logs(extra, metrics, max_names: int = MAX_LOG_NAMES) -> tuple[dict, dict]:
    """What log_extra / log_metric recorded, within MAX_LOG_VALUES values, MAX_LOG_CHARS characters and
    ``max_names`` distinct columns and metric names (the worker sends one record per column)."""
    if type(extra) is not list or type(metrics) is not list:
        raise malformed("the worker sent malformed log records")
    if len(extra) > max_names:
        raise malformed(f"the worker sent {len(extra)} log_extra columns; the limit is {max_names}")
    values = chars = 0
    out_extra: dict[str, list] = {}
    out_metrics: dict[str, list[float]] = {}
    for record in extra:
        if type(record) is not list or len(record) != 2 or type(record[0]) is not str or type(record[1]) is not list:
            raise malformed("the worker sent malformed log records")
        column, items = record
        if len(column) > MAX_LOG_NAME_CHARS:
            raise malformed(f"the worker sent a log_extra column name of {len(column)} characters")
        values += len(items)
        chars += len(column)
        if values > MAX_LOG_VALUES:
            raise malformed(f"the worker sent more than {MAX_LOG_VALUES} logged values")
        if column == step_scores.COLUMN:  # per-step scores: dicts the worker built (child.step_scores_value)
            for v in items:
                if v is not None:
                    scores, split = checked_step_scores(v)
                    values += 1 + len(scores)  # two values plus one per step, as the worker counts them
                    chars += len(split)
            if values > MAX_LOG_VALUES:
                raise malformed(f"the worker sent more than {MAX_LOG_VALUES} logged values")
        for v in items if column != step_scores.COLUMN else ():
            t = type(v)
            if t is str:
                chars += len(v)
            elif not (v is None or t is bool or t is int or t is float):
                raise malformed("the worker sent malformed log records")
        if chars > MAX_LOG_CHARS:
            raise malformed(f"the worker sent more than {MAX_LOG_CHARS} characters of log records")
        out_extra.setdefault(column, []).extend(items)
    for record in metrics:
        if (
            type(record) is not list
            or len(record) != 2
            or type(record[0]) is not str
            or type(record[1]) not in (int, float)
        ):
            raise malformed("the worker sent malformed metric records")
        name, value = record
        if len(name) > MAX_LOG_NAME_CHARS:
            raise malformed(f"the worker sent a metric name of {len(name)} characters")
        values += 1
        chars += len(name)
        if values > MAX_LOG_VALUES or chars > MAX_LOG_CHARS:
            raise malformed(
                f"the worker sent more than {MAX_LOG_VALUES} log records or {MAX_LOG_CHARS} characters of them"
            )
        out_metrics.setdefault(name, []).append(float(value))
        if len(out_metrics) > max_names:
            raise malformed(f"the worker sent more than {max_names} metric names")
    return out_extra, out_metrics


def checked_step_scores(value) -> tuple[list, str]:
    """A ``step_scores`` value's scores and split, as an honest worker sends them: ``{"split": str, "scores": [float
    or None]}`` (and ``"pattern": bool``), at most MAX_STEP_SCORES finite scores, a split of at most MAX_SPLIT_CHARS
    characters; WorkerLost otherwise."""
    if type(value) is not dict or not {"split", "scores"} <= value.keys() <= step_scores.KEYS:
        raise malformed("the worker sent a malformed step_scores value")
    split, scores = value["split"], value["scores"]
    if (
        type(split) is not str
        or len(split) > step_scores.MAX_SPLIT_CHARS
        or type(value.get("pattern", False)) is not bool
        or type(scores) is not list
        or len(scores) > step_scores.MAX_STEP_SCORES
        or any(v is not None and (type(v) is not float or not math.isfinite(v)) for v in scores)
    ):
        raise malformed("the worker sent a malformed step_scores value")
    return scores, split


def run_log_names(
    result: CallResult, seen_columns: set, seen_metrics: set, *, limit: int, func_name: str
) -> CallResult | SandboxError:
    """``result``, its names added to what the function logged before; or LogTooLarge, naming ``func_name``, where
    that would pass ``limit`` distinct columns or metric names for the run (nothing is added then)."""
    new_columns, new_metrics = result.logged_extra.keys() - seen_columns, result.logged_metrics.keys() - seen_metrics
    for what, seen, new in (
        ("log_extra columns", seen_columns, new_columns),
        ("log_metric names", seen_metrics, new_metrics),
    ):
        if len(seen) + len(new) > limit:
            return SandboxError(
                f"{func_name} has logged {len(seen) + len(new)} distinct {what} in this run; the limit is {limit} "
                "(TRL keeps every one it is given for the whole run)",
                kind="LogTooLarge",
                stdout=result.stdout,
            )
    seen_columns |= new_columns
    seen_metrics |= new_metrics
    return result


def error_fields(err) -> tuple[str, str, int | None, str]:
    """kind, message, line, traceback of an error the worker described; nothing else is taken."""
    if type(err) is not dict or not err.keys() <= {"kind", "message", "line", "traceback"}:
        raise malformed("the worker sent a malformed error")
    kind, message, line, tb = err.get("kind"), err.get("message", ""), err.get("line"), err.get("traceback", "")
    if (
        type(kind) is not str
        or not 0 < len(kind) <= MAX_KIND
        or type(message) is not str
        or len(message) > MAX_ERROR_MESSAGE
        or type(tb) is not str
        or len(tb) > MAX_ERROR_TRACEBACK
        or not (line is None or type(line) is int)
    ):
        raise malformed("the worker sent a malformed error")
    return kind, message, line, tb


def user_error(err, stdout: str) -> SandboxError:
    """The user's error as the worker described it: a kind, a message, a line, a traceback, nothing more."""
    kind, message, line, tb = error_fields(err)
    if kind in HOST_KINDS:  # the user's own exception class, not this side speaking
        kind, message = "UserException", f"the function raised an exception named {kind}: {message}"
    return SandboxError(message, kind=kind, line=line, stdout=stdout, traceback=tb)
