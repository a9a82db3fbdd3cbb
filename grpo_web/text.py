"""Names that reach a page, a terminal or a log: without the characters that act rather than show (C0 and C1
controls, DEL) or that reorder the text around them (bidirectional overrides and isolates, as in "gnp.exe" shown
for a name that ends in exe.png)."""

from __future__ import annotations

import re

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean_name(text: str) -> str:
    """``text`` with those characters removed, and its ends stripped."""
    return UNSAFE.sub("", text).strip() if isinstance(text, str) else text


def clean_names(sender, instance, **kwargs) -> None:
    """pre_save: the ``name`` (and ``source_name``) of every object of the project's apps is stored clean, by
    whatever path it came (a form, the API, a YAML file, the command line)."""
    if sender._meta.app_label not in ("runs", "rewards"):
        return
    for field in ("name", "source_name"):
        value = getattr(instance, field, None)
        if isinstance(value, str):
            setattr(instance, field, clean_name(value))
