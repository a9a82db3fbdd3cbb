"""The web process keeps no database connection per request. Django's ASGI handler runs each request's sync code in a
thread of its own, so a connection kept for reuse (CONN_MAX_AGE) stays open with that thread: 40 concurrent requests
left 40 connections open, and CI's PostgreSQL refused clients past 100. The workers keep theirs (60 s)."""

import concurrent.futures
import os
import subprocess
import sys
import urllib.error
import urllib.request

import psutil
import pytest
from django.db import connection

from tests.conftest import BASE_DIR, running_web_server

SETTING = "from django.conf import settings; print(settings.DATABASES['default']['CONN_MAX_AGE'])"


@pytest.mark.parametrize("module, kept", [("grpo_web.asgi", "0"), ("grpo_web.celery", "60")])
def test_the_web_process_keeps_none_and_the_workers_keep_theirs(module, kept, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("GRPO_DB_CONN_MAX_AGE", "DJANGO_SETTINGS_MODULE")}
    # a Redis named (never reached): without one, importing the app would start an embedded Redis that outlives it
    env.update(
        DATABASE_URL="postgres://nobody@127.0.0.1:1/none",
        REDIS_URL="redis://127.0.0.1:1/0",
        GRPO_DATA_DIR=str(tmp_path),
    )
    code = f"import django, {module}; django.setup(); {SETTING}"
    done = subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == kept


@pytest.mark.django_db(transaction=True)
def test_forty_concurrent_requests_leave_no_connection_open(service_env, tmp_path):
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL's connections (SQLite keeps none)")

    def held(port: int) -> int:
        """The web server's own connections to PostgreSQL: its process found by the port it listens on (the
        database's other clients, the session's worker and supervisors among them, come and go)."""
        server = next(
            c.pid for c in psutil.net_connections(kind="tcp") if c.laddr.port == port and c.status == psutil.CONN_LISTEN
        )
        database = int(connection.settings_dict.get("PORT") or 5432)
        return sum(
            1
            for c in psutil.Process(server).net_connections(kind="tcp")
            if c.raddr and c.raddr.port == database and c.status == psutil.CONN_ESTABLISHED
        )

    with running_web_server(service_env, tmp_path / "web.log") as url:

        def ask(_):
            request = urllib.request.Request(f"{url}/api/runs", headers={"Authorization": "Bearer gwp_nope"})
            try:
                urllib.request.urlopen(request, timeout=30)
            except urllib.error.HTTPError as exc:
                return exc.code  # refused by the token lookup: a query each
            return 200

        with concurrent.futures.ThreadPoolExecutor(40) as pool:
            assert set(pool.map(ask, range(40))) == {401}
        # none per request (the server's own, at most); with the workers' 60 s it held 39
        assert held(int(url.rsplit(":", 1)[1])) <= 1
