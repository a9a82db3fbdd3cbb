"""TRL's GRPOConfig, every field, as data the web process can read without importing TRL (and torch):
``grpo_config.json`` beside this file, written from the installed TRL by ``python -m workers.trl_schema --write``
(tests/lifecycle/test_grpo_schema.py compares the two). Each field: name, kind (bool, int, float, str, json),
default, help, choices, and the group TRL's docs document it under ("TrainingArguments" for inherited ones)."""

from __future__ import annotations

import json
from pathlib import Path

INHERITED = "TrainingArguments"  # the group of the fields GRPOConfig inherits (workers.trl_schema)
GRPO_SCHEMA: list[dict] = json.loads((Path(__file__).with_name("grpo_config.json")).read_text())


def grpo_config_fields() -> frozenset[str]:
    """The names of GRPOConfig's fields (read at call time: a test may swap GRPO_SCHEMA for a newer TRL's)."""
    return frozenset(f["name"] for f in GRPO_SCHEMA)


def schema_field(name: str) -> dict | None:
    return next((f for f in GRPO_SCHEMA if f["name"] == name), None)


GRPO_CONFIG_FIELDS = grpo_config_fields()
