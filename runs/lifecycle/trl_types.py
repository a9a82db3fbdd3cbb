"""A config file's values held to the types its trainer takes, never converted to fit (issue 43, item 4).

TRL's CLI (`trl grpo --config file.yaml`: TrlParser, an HfArgumentParser) sets the file's values as argparse
defaults: a string is parsed by the field's type (so ``learning_rate: 1e-6``, a string to YAML 1.1, is 1e-06, and
``use_vllm: "false"`` is False, by transformers' string_to_bool), anything else reaches GRPOConfig as it is. So an
int field takes a whole number or its digits, a float field any number (not true or false), a bool field true, false
or one of string_to_bool's words, a str field text; 64.7 for an int field, ``true`` for a number or a mapping for a
text is refused here, naming the key, the value and the type, where TRL would have trained on it or failed later.
"""

from __future__ import annotations

# transformers.hf_argparser.string_to_bool's words, case-insensitive
TRUE_WORDS = ("yes", "true", "t", "y", "1")
FALSE_WORDS = ("no", "false", "f", "n", "0")

EXPECTED = {
    "bool": "true or false",
    "int": "a whole number (int)",
    "float": "a number (float)",
    "str": "text (str)",
    "dict": "a mapping (dict)",
    "list": "a list",
    "null": "null",
}


class WrongType(ValueError):
    """A value its field's type does not hold; the message names the key, the value and the type."""


def shown(value) -> str:
    """A value as the file wrote it: YAML's null, true and false, Python's repr otherwise (cut at 80 characters)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def expected(types) -> str:
    words = [EXPECTED[t] for t in types if t in EXPECTED and (t != "null" or len(types) == 1)]
    return " or ".join(words) or "a value"


def refusal(key: str, value, types, where: str = "") -> str:
    return f"{key}: {shown(value)} is not {expected(types)}{where}; a value of another type is refused, not converted"


def field_types(type_text: str) -> tuple[str, ...]:
    """A grpo-web config dataclass field's annotation ("int | None") as YAML types."""
    names = {part.strip() for part in str(type_text).split("|")}
    return tuple(sorted("null" if n == "None" else n for n in names))


def trl_value(key: str, value, types, where: str = ""):
    """``value`` as TRL's CLI hands it to GRPOConfig (SFTConfig) for a field of ``types`` (trl_schema._types);
    WrongType for a value of none of them."""
    types = tuple(types)
    if "any" in types:
        return value
    if value is None:
        if "null" in types:
            return None
    elif isinstance(value, bool):
        if "bool" in types:
            return value
    elif isinstance(value, int):
        if "int" in types or "float" in types:
            return value
    elif isinstance(value, float):
        if "float" in types:
            return value
    elif isinstance(value, str):
        if "str" in types:
            return value
        parsed = _parsed(value, types)
        if parsed is not None:
            return parsed
    elif isinstance(value, dict):
        if "dict" in types:
            return value
    elif isinstance(value, list):
        if "list" in types:
            return value
    raise WrongType(refusal(key, value, types, where))


def _parsed(text: str, types) -> bool | int | float | None:
    """A string as argparse parses a default by the field's type (bool, int or float); None where it does not."""
    if "bool" in types and text.lower() in TRUE_WORDS + FALSE_WORDS:
        return text.lower() in TRUE_WORDS
    if "int" in types:
        try:
            return int(text)
        except ValueError:
            pass
    if "float" in types:
        try:
            return float(text)
        except ValueError:
            pass
    return None
