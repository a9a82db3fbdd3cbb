"""The default self-reflection phrases: the default of Run.reflection_phrases and the matcher's starting list
(runs.rollouts.reflection)."""

from __future__ import annotations

# After the DeepSeek-R1 paper's "aha moment" transcripts ("Wait, wait. Wait. That's an aha moment I can flag here.
# Let's reevaluate this step-by-step...") and the phrases later replications counted.
DEFAULT_PHRASES = [
    "wait",
    "let me reconsider",
    "let me re-examine",
    "let's reevaluate",
    "actually",
    "let me check",
    "let me verify",
    "i made an error",
    "i made a mistake",
    "verify",
    "double-check",
    "on second thought",
    "hmm",
]


def default_reflection_phrases() -> list[str]:
    return list(DEFAULT_PHRASES)
