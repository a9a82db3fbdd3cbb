"""An ASGI wrapper that refuses a request body larger than the upload limit before it is read.

Django's ASGI handler spools the whole body to a temporary file before any view (or upload handler) runs, so a
limit checked there comes after the disk is already full. Here a declared Content-Length over the limit is answered
413 at once, and a body that streams past the limit without declaring its size is cut off and answered 413.
"""

from __future__ import annotations

from django.conf import settings

SLACK_BYTES = 1024**2  # multipart boundaries and the form's other fields, around the file itself


class BodyLimit:
    def __init__(self, app, max_bytes: int | None = None):
        self.app = app
        self.max_bytes = max_bytes

    def limit(self) -> int:
        return (self.max_bytes if self.max_bytes is not None else settings.GRPO_MAX_UPLOAD_BYTES) + SLACK_BYTES

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit()
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_large = int(declared) > limit
            except ValueError:
                return await _answer(send, 400, b"Content-Length is not a number.")
            if too_large:
                return await _answer(send, 413, _too_large(limit))
        received, started, cut = 0, False, False

        async def counted_receive():
            nonlocal received, cut
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    cut = True
                    return {"type": "http.disconnect"}  # Django stops reading: RequestAborted
            return message

        async def watched_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counted_receive, watched_send)
        if cut and not started:
            await _answer(send, 413, _too_large(limit))


def _too_large(limit: int) -> bytes:
    return (
        f"The request is larger than the upload limit ({limit - SLACK_BYTES} bytes, GRPO_MAX_UPLOAD_BYTES). "
        f"Nothing was saved."
    ).encode()


async def _answer(send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"connection", b"close"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
