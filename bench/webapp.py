"""What the benches that drive the web server share: a data folder of their own, a signed-in session, uvicorn."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def django_on_a_data_folder(prefix: str):
    """Django set up on a data folder of its own (SQLite and the embedded Redis unless DATABASE_URL / REDIS_URL say
    otherwise), migrated; yields the environment for child processes. The folder and its Redis go at the end."""
    data = Path(tempfile.mkdtemp(prefix=prefix))
    env = {
        **os.environ,
        "GRPO_DATA_DIR": str(data),
        "DJANGO_SETTINGS_MODULE": "grpo_web.settings",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from grpo_web.embedded import ensure_configured_redis

    call_command("migrate", verbosity=0)
    ensure_configured_redis()
    try:
        yield env
    finally:
        if settings.REDIS_EMBEDDED and (data / "redis.pid").exists():
            os.kill(int((data / "redis.pid").read_text()), signal.SIGTERM)
        shutil.rmtree(data, ignore_errors=True)


def signed_in(username: str, csrf: str = "") -> tuple[object, str]:
    """A user (made if missing) and a Cookie header of a session signed in as them (and a CSRF cookie, if given)."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    user, _ = get_user_model().objects.get_or_create(username=username)
    session = SessionStore()
    session[SESSION_KEY], session[BACKEND_SESSION_KEY] = str(user.pk), "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    cookie = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"
    return user, cookie + (f"; {settings.CSRF_COOKIE_NAME}={csrf}" if csrf else "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def web_server(env: dict):
    """One uvicorn process serving the app, as in production; yields (process, port) once it accepts connections."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "grpo_web.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield server, port
    finally:
        stop(server)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
