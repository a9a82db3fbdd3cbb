"""Built-in reward functions.

Plain Python with TRL's reward contract: ``f(completions, **kwargs) -> list[float | None]``; dataset columns arrive
as keyword arguments (``answer=[...]``), one value per completion. No Django imports: the training program loads
these directly. Users can open each one in the editor and copy it.
"""

from __future__ import annotations

import re

THINK_FORMAT = re.compile(r"^\s*<think>.*?</think>.*?\\boxed\{.+?\}", re.DOTALL)


def completion_text(completion) -> str:
    """TRL passes a plain string (standard format) or a list of messages (conversational format)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        return str(completion[-1].get("content", ""))
    return ""


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}``, braces balanced; None if there is none."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed{")
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            if depth == 0:
                return text[i:j].strip()
            depth -= 1
    return None


def _same_answer(given: str, expected: str) -> bool:
    given, expected = given.strip().replace(",", ""), str(expected).strip().replace(",", "")
    if given == expected:
        return True
    try:
        return abs(float(given) - float(expected)) < 1e-9
    except ValueError:
        return False


def think_format(completions, **kwargs) -> list[float]:
    """1.0 when the completion reasons inside <think>...</think> and then gives a \\boxed{} answer, else 0.0."""
    return [1.0 if THINK_FORMAT.match(completion_text(c)) else 0.0 for c in completions]


def accuracy(completions, answer, **kwargs) -> list[float | None]:
    """1.0 when the last \\boxed{} answer equals the row's ``answer`` column, else 0.0; None when a row has no answer."""
    rewards: list[float | None] = []
    for c, expected in zip(completions, answer, strict=True):
        if expected is None or str(expected).strip() == "":
            rewards.append(None)
            continue
        boxed = extract_boxed(completion_text(c))
        rewards.append(1.0 if boxed is not None and _same_answer(boxed, expected) else 0.0)
    return rewards


def digit_ratio(completions, **kwargs) -> list[float]:
    """Share of the completion's non-space characters that are digits: a dense reward a tiny model learns fast (demo)."""
    rewards = []
    for c in completions:
        chars = [ch for ch in completion_text(c) if not ch.isspace()]
        rewards.append(sum(ch.isdigit() for ch in chars) / len(chars) if chars else 0.0)
    return rewards


BUILTINS = {f.__name__: f for f in (think_format, accuracy, digit_ratio)}
