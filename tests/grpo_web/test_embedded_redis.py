"""The embedded Redis keeps an append-only file, and the processes that use it start it again when it has died."""

import os
import signal
import time

import redis

from grpo_web import embedded
from tests.conftest import wait_for


def _answers(client) -> bool:
    try:
        return client.ping()
    except redis.ConnectionError:
        return False


def test_a_killed_embedded_redis_comes_back_with_what_it_held(tmp_path, monkeypatch, settings):
    socket_path = embedded.ensure_redis(tmp_path)
    client = redis.Redis(unix_socket_path=str(socket_path))
    try:
        client.rpush("training", b'{"queued": "a run"}')
        time.sleep(1.5)  # appendfsync everysec
        os.kill(int((tmp_path / "redis.pid").read_text()), signal.SIGKILL)
        time.sleep(0.5)
        assert not (tmp_path / "redis.sock").exists() or not _answers(client)
        settings.REDIS_EMBEDDED, settings.DATA_DIR = True, tmp_path
        monkeypatch.setattr(embedded, "_checked_at", 0.0)
        embedded.ensure_configured_redis()  # what every process (a worker's beat, an enqueue) calls
        assert client.lrange("training", 0, -1) == [b'{"queued": "a run"}']
    finally:
        pid = tmp_path / "redis.pid"
        if pid.exists():
            try:
                os.kill(int(pid.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass


def test_stop_redis_stops_the_embedded_server_and_says_whether_it_ran(tmp_path):
    """What a clean stop of the demo does to the Redis it started (issue 30: it was left running)."""
    from grpo_web.embedded import ensure_redis, redis_running, stop_redis

    folder = tmp_path / "data"
    ensure_redis(folder)
    assert redis_running(folder)
    assert stop_redis(folder) is True
    wait_for(lambda: not redis_running(folder), timeout=10, what="the embedded Redis to stop")
    assert stop_redis(folder) is False
