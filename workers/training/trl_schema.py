"""TRL's GRPOConfig as data: every field's name, kind, default, help, choices, the group TRL's docs put it in and the
YAML types it takes.

The web process never imports TRL (or torch), so the run form and the YAML import read this from
``protocol/grpo_web_protocol/grpo_config.json``, which this program writes from the installed TRL:

    python -m workers.training.trl_schema --write

tests/lifecycle/test_grpo_schema.py checks the stored file against the installed TRL, so an upgrade that adds, drops
or changes a field fails until the file is written again (and the new field is on the form without other work).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import types
import typing
from pathlib import Path

from grpo_web_protocol.trl_fields import INHERITED  # the group of the fields inherited from TrainingArguments

SCHEMA_PATH = Path(__file__).resolve().parent / "protocol" / "grpo_config.json"

_SECTION = re.compile(r"^\s*> Parameters that control (.+?)\s*$")
_PARAM = re.compile(r"^\s+(\w+) \(")


def _groups(cls) -> dict[str, str]:
    """field name -> the docstring section it is documented under ("generation", "training", ...), from the class
    and the classes it extends (the nearest documentation wins)."""
    groups: dict[str, str] = {}
    for klass in cls.__mro__:
        section, indent = None, None
        for line in (klass.__doc__ or "").splitlines():
            if m := _SECTION.match(line):
                section, indent = re.sub(r"^(the )", "", m.group(1)), None
            elif section and (m := _PARAM.match(line)):
                width = len(line) - len(line.lstrip())
                indent = width if indent is None else indent
                if width == indent:  # a parameter line, not its description (indented deeper)
                    groups.setdefault(m.group(1), section)
    return groups


def _kind(annotation) -> str:
    """bool, int, float, str, or json (dicts, lists, unions of those): how a form edits it."""
    if isinstance(annotation, str):
        text = annotation.replace(" ", "")
        options = set(text.split("|")) - {"None"}
    else:
        args = (
            typing.get_args(annotation)
            if typing.get_origin(annotation) in (typing.Union, types.UnionType)
            else (annotation,)
        )
        options = {getattr(a, "__name__", str(a)) for a in args if a is not type(None)}
    for kind in ("bool", "int", "float", "str"):
        if options == {kind}:
            return kind
    if options == {"int", "float"}:
        return "float"
    return "json"


def _types(annotation) -> list[str]:
    """The YAML types the field holds, as TRL's CLI passes a file's values on (HfArgumentParser: unconverted but
    for strings): bool, int, float, str, dict, list, null; "any" where the annotation is a class of its own. A str
    enum (transformers' IntervalStrategy, ...) is str, a Literal the types of its values."""
    if isinstance(annotation, str):
        return ["any"]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return sorted({t for a in typing.get_args(annotation) for t in _types(a)})
    if origin is typing.Literal:
        return sorted({"null" if v is None else type(v).__name__ for v in typing.get_args(annotation)})
    base = origin or annotation
    if base is type(None):
        return ["null"]
    for kind in (bool, int, float, str, dict, list):
        if isinstance(base, type) and issubclass(base, kind):
            return [kind.__name__]
    return ["any"]


def _choices(f: dataclasses.Field) -> list[str]:
    """The choices the field declares (prose in the help text is not parsed: TRL words it too many ways)."""
    return [str(c) for c in f.metadata.get("choices") or () if c is not None]


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return None
    value = getattr(value, "value", value)  # enums (transformers' IntervalStrategy, ...) as their text
    try:
        json.dumps(value)
    except TypeError:
        return str(value)
    return value


def grpo_schema(cls=None) -> list[dict]:
    """Every field of ``cls`` (TRL's GRPOConfig by default), in declaration order."""
    if cls is None:
        from trl import GRPOConfig as cls
    from transformers import TrainingArguments

    hints = typing.get_type_hints(cls)
    groups = _groups(cls)
    inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
    own_doc = set(groups)
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        kind = _kind(f.type)
        group = groups.get(f.name) or (INHERITED if f.name in inherited and f.name not in own_doc else "other")
        out.append(
            {
                "name": f.name,
                "kind": kind,
                "default": _default(f),
                "help": " ".join((f.metadata.get("help") or "").split()),
                "choices": _choices(f),
                "group": group,
                "types": _types(hints.get(f.name, f.type)),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {SCHEMA_PATH.name} (else print it)")
    args = parser.parse_args(argv)
    text = json.dumps(grpo_schema(), indent=1, ensure_ascii=False) + "\n"
    if args.write:
        SCHEMA_PATH.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
