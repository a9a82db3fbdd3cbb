"""New steps pushed to open pages through Redis pub/sub (read by the server-sent events view)."""

from __future__ import annotations

import json

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django.http import StreamingHttpResponse

from grpo_web.embedded import ensure_configured_redis
from runs.models import Run

_client = None


def channel(run_id: int) -> str:
    return f"grpo:run:{run_id}"


def redis_client():
    global _client
    if _client is None:
        ensure_configured_redis()
        _client = redis.Redis.from_url(settings.REDIS_URL)
    return _client


def publish(run_id: int, **payload) -> None:
    redis_client().publish(channel(run_id), json.dumps(payload))


def sse_response(run_ids: list[int]):
    """Server-sent events carrying the runs' pushes on one connection: "open" once subscribed, then one message per
    push, its payload with ``run`` set to the run's id, and a comment every 15 s of quiet to keep the connection open.

    "open" carries each run's ``version`` as read after subscribing (``{"versions": {id: "attempt.bytes"}}``, the
    ``version`` of metrics.json): a page whose data is of that version has missed nothing and need not refetch;
    anything ingested since is pushed."""
    runs_by_channel = {channel(pk).encode(): pk for pk in run_ids}

    async def stream():
        client = aioredis.Redis.from_url(settings.REDIS_URL)
        pubsub = client.pubsub()
        await pubsub.subscribe(*runs_by_channel)
        try:
            versions = {
                str(pk): f"{attempt}.{offset}"
                async for pk, attempt, offset in Run.objects.filter(pk__in=run_ids).values_list(
                    "pk", "attempt", "event_offset"
                )
            }
            yield f"retry: 2000\nevent: open\ndata: {json.dumps({'versions': versions})}\n\n"
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=15.0)
                if message is None:
                    yield ": keep-alive\n\n"
                else:
                    payload = {**json.loads(message["data"]), "run": runs_by_channel[message["channel"]]}
                    yield f"data: {json.dumps(payload)}\n\n"
        finally:
            await pubsub.aclose()
            await client.aclose()

    response = StreamingHttpResponse(stream(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
