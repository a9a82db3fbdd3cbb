"""The built-in reward library: one self-contained file per function, so its text is a template users can copy.

Each file defines one function under its file's name with TRL's contract. ``BUILTINS`` imports them for trusted,
in-process use (tests, benchmarks); users' copies run in the sandbox.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path

LIBRARY_DIR = Path(__file__).parent
NAMES = [
    "accuracy",
    "think_format",
    "length_penalty",
    "letter_count",
    "language_consistency",
    "digit_ratio",
    "equation_steps",
]
# open-r1's reward registry under its own names (recipes that name them import as they are, rewards.open_r1)
OPEN_R1 = ["format", "tag_count", "reasoning_steps", "cosine", "repetition_penalty", "length"]
# Oumi's reward registry names its recipes use (Oumi's behaviour, imports bind to them)
OUMI = ["count_letters", "soft_20tokens_completions"]
# Tools (TRL's ``tools``): functions the model calls while it generates, run in the sandbox like users' copies
TOOLS = ["calculator"]
# Environments (TRL's ``environment_factory``): a class per file; its public methods are tools, get_reward a reward
ENVIRONMENTS = {"calculator_session": "CalculatorSession"}


def source(name: str) -> str:
    return (LIBRARY_DIR / f"{name}.py").read_text()


@cache
def function(name: str):
    return getattr(importlib.import_module(f"rewards.library.{name}"), name)
