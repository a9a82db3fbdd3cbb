"""Self-reflection phrases (the R1 "aha moment"), matched at ingest and highlighted on pages."""

from __future__ import annotations

import re

DEFAULT_PHRASES = [
    "wait",
    "let me reconsider",
    "let me re-examine",
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

_PATTERN = re.compile(r"\b(" + "|".join(re.escape(p) for p in sorted(DEFAULT_PHRASES, key=len, reverse=True)) + r")\b",
                      re.IGNORECASE)


def find_reflections(text: str) -> list[str]:
    """Distinct phrases found in ``text``, lower-cased, in order of first appearance."""
    seen: dict[str, None] = {}
    for match in _PATTERN.finditer(text):
        seen.setdefault(match.group(1).lower(), None)
    return list(seen)


def pattern_source() -> str:
    """The same pattern for the page's highlighter (JavaScript regex syntax is compatible here)."""
    return _PATTERN.pattern
