"""Settings from the environment through small helpers that fail loudly on bad values (healthchecks' envbool/envint)."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def envstr(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name, default)


def envbool(name: str, default: str) -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def envint(name: str, default: str) -> int:
    value = os.environ.get(name, default)
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None


def envfloat(name: str, default: str) -> float:
    value = os.environ.get(name, default)
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None


def envhttp(name: str, default: str = "") -> str:
    """An http(s) URL, or "" when unset."""
    value = os.environ.get(name, default).strip().rstrip("/")
    if value and not value.startswith(("http://", "https://")):
        raise ImproperlyConfigured(f"{name}={value!r} is not an http(s) URL")
    return value


def envpaths(name: str, default: str = "") -> list[Path]:
    """Comma-separated absolute folders; a relative one is an error (it would mean a different folder to each
    process, from wherever it was started)."""
    parts = [p.strip() for p in os.environ.get(name, default).split(",") if p.strip()]
    relative = [p for p in parts if not Path(p).is_absolute()]
    if relative:
        raise ImproperlyConfigured(f"{name}: {relative[0]!r} is not an absolute path")
    return [Path(p).resolve() for p in parts]


def hub_offline() -> bool:
    """Whether this process may not reach the Hugging Face hub (HF_HUB_OFFLINE, as huggingface_hub reads it)."""
    from huggingface_hub import constants  # only where a hub id is checked: the settings import no ML library

    value = os.environ.get("HF_HUB_OFFLINE", "").upper()
    return value in {"1", "ON", "YES", "TRUE"} or bool(constants.HF_HUB_OFFLINE)
