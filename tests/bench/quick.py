"""Running a bench's quick mode as CI does: its own process, the environment it needs, checked by
bench.registry.check (exit status, last line in the documented form, every figure printed)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from bench.registry import Bench, Result, run

QUICK_TIMEOUT = 600  # a hung bench fails here rather than holding CI


def postgres_url(bench: Bench) -> str:
    """A database of the bench's own on the tests' PostgreSQL server (the bench creates and drops it), or on
    GRPO_BENCH_DATABASE_URL's where the tests run on SQLite (CI's embedded-default lane)."""
    url = os.environ.get("GRPO_BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.skip(
            f"bench.{bench.name} needs PostgreSQL: neither GRPO_BENCH_DATABASE_URL nor DATABASE_URL names a "
            "postgres:// server"
        )
    parts = urlparse(url)
    return parts._replace(path=f"/{parts.path.lstrip('/')}_bench_{bench.name}").geturl()


def arguments(bench: Bench) -> list[str]:
    """What the bench is given beside --quick, and a skip (with the reason) for what this machine lacks."""
    extra = []
    if "postgres" in bench.needs:
        extra += ["--database-url", postgres_url(bench)]
    if "chromium" in bench.needs and not Path("/usr/bin/chromium").exists():
        pytest.skip(f"bench.{bench.name} needs chromium at /usr/bin/chromium")
    if "ray" in bench.needs and not (Path(sys.executable).parent / "ray").exists():
        pytest.skip(f"bench.{bench.name} needs Ray: pip install 'ray[default,train]'")
    return extra


def quick(bench: Bench, *extra: str) -> Result:
    """``bench --quick``, on data folders of its own: the tests' database, Redis and data folder are not its."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "GRPO_DATA_DIR")}
    return run(bench, "--quick", *extra, env=env, timeout=QUICK_TIMEOUT)
