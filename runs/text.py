"""How prompts and completions are stored: as the exact text, and named by a short hash of the prompt.

PostgreSQL text cannot hold NUL (nor can jsonb), and model output can. A stored prompt or completion
(runs.models.ExactTextField, and the ingest's own COPY), and every text and key in a JSON column of model output or user
data (ExactJSONField: a row's columns and messages, a run's config and provenance), writes NUL as U+2400 U+FE00 and a
U+2400 of the text itself as U+2400 U+FE01 (a visible NUL sign; the variation selector after it is invisible), and
reads them back: what was sent is what is read, on every path that reads through the ORM. Text holding neither is stored as it is. A bare U+2400 in the column (written before
this escape) reads as itself.
"""

from __future__ import annotations

import hashlib
import json
import re

_ESCAPE = {0x00: "\u2400\ufe00", 0x2400: "\u2400\ufe01"}
_ESCAPED = re.compile("\u2400([\ufe00\ufe01])")


def stored_text(text: str) -> str:
    """``text`` as a text column keeps it (NUL-free), undone by ``exact_text``."""
    if "\x00" not in text and "\u2400" not in text:
        return text
    return text.translate(_ESCAPE)


def exact_text(stored: str) -> str:
    """The text ``stored_text`` stored."""
    if "\u2400" not in stored:
        return stored
    return _ESCAPED.sub(lambda m: "\x00" if m[1] == "\ufe00" else "\u2400", stored)


def as_text(value) -> str:
    """Prompts and completions are strings, or message lists in TRL's conversational format: the text, exact (a
    column stores it through ``stored_text``)."""
    if isinstance(value, list):
        value = "\n".join(_message_text(m) for m in value if isinstance(m, dict))
    elif not isinstance(value, str):
        value = json.dumps(value)
    return value


def _message_text(message: dict) -> str:
    """One turn as a line: its role and content, and each tool call as ``name(arguments as JSON)``."""
    text = f"{message.get('role', '')}: {message.get('content', '')}"
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        if isinstance(function, dict):
            text += f"\n{function.get('name', '')}({json.dumps(function.get('arguments', {}), default=str)})"
    return text


def stored_json(value):
    """A JSON value as a JSON column keeps it (jsonb refuses \u0000 too): every text in it, keys included, through
    ``stored_text``; undone by ``exact_json`` (runs.models.ExactJSONField does both)."""
    if isinstance(value, str):
        return stored_text(value)
    if isinstance(value, dict):
        return {stored_text(str(k)): stored_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [stored_json(v) for v in value]
    return value


def exact_json(value):
    """The JSON value ``stored_json`` stored."""
    if isinstance(value, str):
        return exact_text(value)
    if isinstance(value, dict):
        return {exact_text(k): exact_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [exact_json(v) for v in value]
    return value


def prompt_key(prompt: str) -> str:
    """Names one prompt across steps: 16 hex digits of its SHA-256 (the comparison page's ``prompt_hash``)."""
    return hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:16]
