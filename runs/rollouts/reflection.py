"""Self-reflection phrases (the R1 "aha moment"): a per-run list, matched at ingest and highlighted on pages.

An entry is a phrase, matched case-insensitively as whole words ("wait" finds "Wait," but not "awaited"), or a
regular expression written between slashes (``/let me re-?check/``), matched case-insensitively as Python's ``re``
reads it. A completion's tags are the entries that match it, in the list's order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from runs.phrases import DEFAULT_PHRASES

MAX_PHRASES = 62  # each has a bit of Rollout.reflection_mask, a positive bigint
MAX_PHRASE_CHARS = 200
# a quantified group that itself holds a quantifier, e.g. (a+)+ : catastrophic backtracking on a near miss
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,)")


def _is_regex(entry: str) -> bool:
    return len(entry) > 2 and entry.startswith("/") and entry.endswith("/")


def _compile(entry: str) -> re.Pattern:
    if _is_regex(entry):
        return re.compile(entry[1:-1], re.IGNORECASE)
    return re.compile(r"(?<!\w)" + re.escape(entry) + r"(?!\w)", re.IGNORECASE)


def clean_phrases(lines: list[str]) -> list[str]:
    """Validate an edited list: trimmed, no blanks or duplicates. ValueError names the entry that is wrong."""
    phrases: list[str] = []
    for line in lines:
        entry = line.strip()
        if not entry or entry in phrases:
            continue
        if len(entry) > MAX_PHRASE_CHARS:
            raise ValueError(f"'{entry[:40]}…' is longer than {MAX_PHRASE_CHARS} characters")
        if any(not c.isprintable() for c in entry):  # a NUL cannot even be stored (PostgreSQL's jsonb refuses it)
            raise ValueError(f"{entry.encode('unicode_escape').decode()[:60]}: holds a control character")
        if _is_regex(entry):
            try:
                pattern = _compile(entry)
            except re.error as exc:
                raise ValueError(f"{entry}: not a regular expression ({exc})") from None
            if pattern.search(""):
                raise ValueError(f"{entry}: matches empty text, so it would tag every completion")
            if _NESTED_QUANTIFIER.search(entry):
                raise ValueError(
                    f"{entry}: a repeated group that itself repeats (like (a+)+) can take hours on one "
                    f"completion; write it without the nesting"
                )
        phrases.append(entry if _is_regex(entry) else entry.lower())
    if len(phrases) > MAX_PHRASES:
        raise ValueError(f"at most {MAX_PHRASES} phrases")
    return phrases


@dataclass(frozen=True)
class PhraseMatcher:
    phrases: tuple[str, ...]
    patterns: tuple[re.Pattern, ...]
    # the lower-cased phrase for a plain entry (a fast substring test before the word-boundary regex), else None
    needles: tuple[str | None, ...]

    def bit(self, phrase: str) -> int:
        """Its bit in Rollout.reflection_mask; 0 for a phrase not in the list."""
        return reflection_mask([phrase], self.phrases)

    def find(self, text: str) -> list[str]:
        """The entries found in ``text``, in the list's order.

        This runs on every completion at ingest, so plain phrases take a fast path: a substring search of the
        lower-cased text and a look at the characters around each occurrence, instead of the regex, which would try
        its look-behind at every position of the text."""
        lowered = text.lower()
        aligned = len(lowered) == len(text)  # lower-casing kept every position (all but a few characters do)
        found = []
        for phrase, pattern, needle in zip(self.phrases, self.patterns, self.needles):
            if needle is None or not aligned:
                if pattern.search(text):
                    found.append(phrase)
            elif needle in lowered and next(_whole_words(lowered, needle), None):
                found.append(phrase)
        return found

    def spans(self, text: str) -> list[list[int]]:
        """[[start, end], ...] of every match, merged, in UTF-16 code units (JavaScript string offsets)."""
        lowered = text.lower()
        aligned = len(lowered) == len(text)
        found = []
        for pattern, needle in zip(self.patterns, self.needles):
            if needle is None or not aligned:
                found += [(m.start(), m.end()) for m in pattern.finditer(text) if m.end() > m.start()]
            elif needle in lowered:
                found += _whole_words(lowered, needle)
        return js_spans(text, found)


def js_spans(text: str, found, limit: int | None = None) -> list[list[int]]:
    """``found`` ((start, end) in characters of ``text``) sorted, merged where they touch, the first ``limit`` kept,
    as [[start, end], ...] in UTF-16 code units (JavaScript string offsets)."""
    merged: list[list[int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    merged = merged[:limit]
    if text.isascii():
        return merged
    return [[utf16_length(text[:s]), utf16_length(text[:e])] for s, e in merged]


def _whole_words(text: str, needle: str):
    """(start, end) of each occurrence of ``needle`` with no word character just before or after it: the regex's
    (?<!\\w) and (?!\\w), as str.isalnum and "_" are \\w."""
    start, size = text.find(needle), len(needle)
    while start >= 0:
        end = start + size
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            yield start, end
        start = text.find(needle, start + 1)


def utf16_length(text: str) -> int:
    """``len`` as JavaScript counts: UTF-16 code units (a character past U+FFFF is two)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def reflection_mask(tags: list[str], phrases) -> int:
    """The bits of ``tags`` (bit i: ``phrases[i]``), as Rollout.reflection_mask stores them."""
    bits = {phrase: 1 << i for i, phrase in enumerate(phrases) if i < MAX_PHRASES}
    return sum(bits.get(tag, 0) for tag in set(tags))


@lru_cache(maxsize=64)
def matcher(phrases: tuple[str, ...]) -> PhraseMatcher:
    return PhraseMatcher(
        phrases=phrases,
        patterns=tuple(_compile(p) for p in phrases),
        needles=tuple(None if _is_regex(p) else p.lower() for p in phrases),
    )


def find_reflections(text: str, phrases: list[str] | tuple[str, ...] = tuple(DEFAULT_PHRASES)) -> list[str]:
    return matcher(tuple(phrases)).find(text)
