"""TRL's own per-token tensors at each update, watched by a tracer of the tests' own, independently of the token capture
(which holds ``_compute_loss``'s frame instead): ``sys.settrace`` follows every call of TRL's
``GRPOTrainer._compute_loss`` while the model trains and keeps its inputs and its locals as it returns.

Imported by the token capture's tests, and loaded by path by the attach tests' TRL script (a user's script: nothing
of the project on its path), so: the standard library and TRL only."""

from __future__ import annotations

import json
import sys

# the locals of TRL's _compute_loss kept at its return (and its inputs)
LOCALS = (
    "per_token_logps",
    "old_per_token_logps",
    "entropies",
    "coef_1",
    "is_low_clipped",
    "is_high_clipped",
    "is_region_clipped",
    "mask",
    "inputs",
)
INPUTS = ("completion_ids", "completion_mask", "old_per_token_logps", "ref_per_token_logps", "grpo_web_row")


def watch_trl(trainer):
    """(tracer, calls): install ``tracer`` with sys.settrace around training; each call of TRL's _compute_loss while
    the model trains appends {"step": the optimizer step it computes, **its locals at return}."""
    from trl import GRPOTrainer

    code = GRPOTrainer._compute_loss.__code__
    calls: list[dict] = []

    def local(frame, event, arg):
        if event == "return":
            seen = {k: frame.f_locals.get(k) for k in LOCALS}
            calls.append({"step": trainer.state.global_step + 1, **seen})
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code is code and trainer.model.training else None

    return tracer, calls


def dump(calls: list[dict], path) -> None:
    """The watched calls as JSON (tensors as lists: float32 values as the doubles they are, exactly)."""

    def plain(value):
        return value.tolist() if hasattr(value, "tolist") else value

    out = []
    for call in calls:
        entry = {k: plain(v) for k, v in call.items() if k != "inputs"}
        entry["inputs"] = {k: plain(call["inputs"].get(k)) for k in INPUTS}
        out.append(entry)
    with open(path, "w") as fh:
        json.dump(out, fh)


class Watching:
    """``with Watching(trainer) as calls: trainer.train()``."""

    def __init__(self, trainer):
        self.tracer, self.calls = watch_trl(trainer)

    def __enter__(self) -> list[dict]:
        sys.settrace(self.tracer)
        return self.calls

    def __exit__(self, *exc) -> None:
        sys.settrace(None)
