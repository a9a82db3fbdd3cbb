"""Settings from the environment through small helpers that fail loudly on bad values (healthchecks' envbool/envint)."""

from __future__ import annotations

import os

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
