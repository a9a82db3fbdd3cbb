"""How prompts and completions are stored: as text, NUL-free, and named by a short hash of the prompt."""

from __future__ import annotations

import hashlib
import json


def as_text(value) -> str:
    """Prompts and completions are strings, or message lists in TRL's conversational format.

    Model output can hold NUL characters, which PostgreSQL text cannot store: they become U+2400 (a visible NUL).
    """
    if isinstance(value, list):
        value = "\n".join(_message_text(m) for m in value if isinstance(m, dict))
    elif not isinstance(value, str):
        value = json.dumps(value)
    return value.replace("\x00", "\u2400")


def _message_text(message: dict) -> str:
    """One turn as a line: its role and content, and each tool call as ``name(arguments as JSON)``."""
    text = f"{message.get('role', '')}: {message.get('content', '')}"
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        if isinstance(function, dict):
            text += f"\n{function.get('name', '')}({json.dumps(function.get('arguments', {}), default=str)})"
    return text


def json_safe(value):
    """Dataset cells for a JSON column: NUL-free text (PostgreSQL jsonb refuses \u0000 too)."""
    if isinstance(value, str):
        return value.replace("\x00", "\u2400")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def prompt_key(prompt: str) -> str:
    """Names one prompt across steps: 16 hex digits of its SHA-256 (the comparison page's ``prompt_hash``)."""
    return hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:16]
