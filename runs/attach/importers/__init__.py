"""Converters from the files other trainers write to grpo-web's event-log events (grpo_web_protocol.events):
TRL's completions tables (``trl``), verl's rollout dumps and its validation dumps (``verl``: rollouts, and periodic
evaluations), a Trackio project TRL logged to (``trackio``).

No Django here: each converter reads files and gives a ``Converted`` (the events, the reward names, how complete
the record is), or raises ``ImportFault`` naming the file and the row. runs.attach.importing stores them as a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_FILES = 100_000  # files in one folder to import
MAX_FILE_BYTES = 2 * 1024**3  # one table or dump
VALIDATION = "validation/"  # a verl validation dump's name in the record of files read (rollout dumps share names)


class ImportFault(ValueError):
    """Files that cannot be imported as they are; the message names the file, and the row or line where it can."""


@dataclass
class Converted:
    """What a converter read: the events in step order and what the run page says about them."""

    source: str  # "trl", "verl", "trackio"
    events: list[dict] = field(default_factory=list)
    reward_names: list[str] = field(default_factory=list)
    total_steps: int | None = None  # the run's length, where the files say it
    every: int | None = None  # the trainer wrote rollouts every this many steps (TRL's logging_steps)
    advantage_computed: bool = False  # the advantages are grpo-web's recomputation, not the trainer's
    length_known: bool = True  # completion lengths are token counts (else 0: the files have none)
    num_generations: int | None = None
    config: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the files read, by name (watch mode skips them next time)
    # metrics read from a log the trainer rewrites or extends (TRL's trainer_state.json, verl's file logger): read
    # whole each time, so watch mode appends only those past the last step it stored; the same dicts are in events
    log_metrics: list[dict] = field(default_factory=list)
    # what the next read of a watched folder needs so as to read only what was appended: how far a log was read,
    # the dumps' kinds, the trainer state's size and time
    watch_state: dict = field(default_factory=dict)
    bytes_read: int = 0  # the bytes read from the files (runs.attach.importers.rootfs counts them)

    def fresh_events(self, after: int) -> list[dict]:
        """The events, less the log's metrics up to step ``after`` (stored by an earlier read)."""
        old = {id(e) for e in self.log_metrics if e["step"] <= after}
        return [e for e in self.events if id(e) not in old]

    @property
    def rollout_steps(self) -> list[int]:
        return sorted({e["step"] for e in self.events if e["type"] == "rollouts" and e["rows"]})

    @property
    def evaluation_steps(self) -> list[int]:
        """The steps of the periodic evaluations read (verl's validation dumps)."""
        return sorted({e["step"] for e in self.events if e["type"] == "eval"})

    @property
    def rows(self) -> int:
        return sum(len(e["rows"]) for e in self.events if e["type"] == "rollouts")


def describe(source: str, steps: int, total: int | None, every: int | None, validations: list[int] | tuple = ()) -> str:
    """How complete an imported run's record is, for its page: "rollouts for 10 of 100 steps: TRL wrote every
    10th batch"; ``validations``: the steps of the evaluations read from verl's validation dumps."""
    if validations:
        shown = ", ".join(map(str, validations[:12])) + (", ..." if len(validations) > 12 else "")
        those = f"{len(validations)} validation{'s' if len(validations) != 1 else ''} (step{'s' if len(validations) != 1 else ''} {shown})"
        if not steps:
            return f"no rollouts: {those} from verl's validation dump, as the run's evaluations"
        return f"{describe(source, steps, total, every)}; {those} from verl's validation dump, as its evaluations"
    of = f" of {total}" if total else ""
    text = f"rollouts for {steps}{of} step{'s' if (total or steps) != 1 else ''}"
    if source in ("trl", "trackio"):
        if every and every > 1:
            return f"{text}: TRL wrote every {_nth(every)} batch (logging_steps={every})"
        return f"{text}: TRL writes the last batch before each logged step"
    if source == "verl":
        return f"{text}: verl dumps every step it trained"
    return text


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
