"""New steps pushed to open pages through Redis pub/sub (read by the server-sent events view)."""

from __future__ import annotations

import json

from django.conf import settings

from grpo_web.embedded import ensure_configured_redis

_client = None


def channel(run_id: int) -> str:
    return f"grpo:run:{run_id}"


def redis_client():
    global _client
    if _client is None:
        import redis

        ensure_configured_redis()
        _client = redis.Redis.from_url(settings.REDIS_URL)
    return _client


def publish(run_id: int, **payload) -> None:
    redis_client().publish(channel(run_id), json.dumps(payload))
