"""One fault budget for whatever the training program runs in a sandbox (a reward function, a tool, an environment's
tools): each fault is counted, and once ``max_faults`` of them have been counted the thing is disabled for the rest of
the run. What counts as a fault is the caller's to say (any failed reward call; a tool's lost worker). No Django."""

from __future__ import annotations


class FaultBudget:
    """``faults`` counted so far; ``disabled`` once ``max_faults`` of them are spent (never before the first fault)."""

    def __init__(self, max_faults: int):
        self.max_faults = max_faults
        self.faults, self.disabled = 0, False

    def spend(self) -> bool:
        """Count one fault; whether that disabled it."""
        self.faults += 1
        self.disabled = self.faults >= self.max_faults
        return self.disabled


__all__ = ["FaultBudget"]
