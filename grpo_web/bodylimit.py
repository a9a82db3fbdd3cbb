"""An ASGI wrapper that limits a request body by URL before it is read.

Django's ASGI handler spools the whole body to a temporary file before any view, upload handler, login or CSRF check
runs, so a limit checked there comes after the disk is already full. Here:

- only the upload endpoints (a dataset, or a version of one, or a run's files to import, from the page or the API) take bodies up to the upload
  limit (GRPO_MAX_UPLOAD_BYTES), and only from a logged-in user or a live API token, and from a browser only when the
  request comes from this site's own pages (its Origin): anyone else gets 403 before a byte is read;
- every other URL takes what a form or a JSON body needs (Django's DATA_UPLOAD_MAX_MEMORY_SIZE and a little room);
- a declared Content-Length over the URL's limit is answered 413 at once, and a body that streams past it without
  declaring its size is cut off and answered 413. Answers under /api/ are JSON.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from urllib.parse import urlparse

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.sessions.backends.base import SessionBase
from django.utils.module_loading import import_string

from runs.accounts.services import token_user

SLACK_BYTES = 1024**2  # multipart boundaries and the form's other fields, around the file itself
# a dataset (or a version of one), and a run's files to import (runs.attach.importing), from the page or the API
UPLOAD_PATHS = re.compile(
    r"/datasets/(?:\d+/)?upload/|/api/datasets(?:/\d+/versions)?/?|/runs/import-files/|/api/runs/import/upload"
)
ATTACH_PATHS = re.compile(r"/api/attach/runs/\d+/events")  # an attach client's batches: a token, no browser
SHARD_PATHS = re.compile(r"/api/attach/runs/\d+/tokens/\d+")  # and its token shards


class BodyLimit:
    def __init__(self, app, max_bytes: int | None = None):
        self.app = app
        self.max_bytes = max_bytes

    def upload_limit(self) -> int:
        return (self.max_bytes if self.max_bytes is not None else settings.GRPO_MAX_UPLOAD_BYTES) + SLACK_BYTES

    @staticmethod
    def form_limit() -> int:
        return settings.DATA_UPLOAD_MAX_MEMORY_SIZE + SLACK_BYTES

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        path, headers = scope.get("path", ""), dict(scope.get("headers") or [])
        json_answers = path.startswith("/api/")
        upload = UPLOAD_PATHS.fullmatch(path) is not None
        batch = ATTACH_PATHS.fullmatch(path) is not None
        shard = SHARD_PATHS.fullmatch(path) is not None
        attach = batch or shard
        limit = self.upload_limit() if upload else self.form_limit()
        if batch:
            limit = settings.GRPO_ATTACH_MAX_BATCH_BYTES + SLACK_BYTES
        if shard:
            limit = settings.GRPO_ATTACH_MAX_SHARD_BYTES + SLACK_BYTES
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                declared = int(declared)
            except ValueError:
                return await _answer(send, 400, "Content-Length is not a number.", json_answers)
        if (upload or attach) and (declared is None or declared > self.form_limit()):
            refusal = await sync_to_async(_upload_refusal)(headers, ("write", "attach") if attach else ("write",))
            if refusal:
                return await _answer(send, 403, refusal, json_answers)
        if declared is not None and declared > limit:
            return await _answer(send, 413, _too_large(limit, upload), json_answers)
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
            await _answer(send, 413, _too_large(limit, upload), json_answers)


def _upload_refusal(headers: dict, scopes: tuple[str, ...] = ("write",)) -> str:
    """Why a large upload may not be read ("" when it may): it needs a live API token, or a logged-in user whose
    browser sent it from this site's pages. Django checks the CSRF token itself once the body is read."""
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    if authorization[:7].lower() == "bearer ":
        found = token_user(authorization[7:].strip())
        if found is None or found[1] not in scopes:
            return "Uploads need a live write token (Authorization: Bearer ...). Nothing was read."
        return ""
    cookies = _cookies(headers.get(b"cookie", b"").decode("latin-1"))
    session_key = cookies.get(settings.SESSION_COOKIE_NAME, "")
    store: SessionBase = import_string(settings.SESSION_ENGINE).SessionStore(session_key or None)
    if not session_key or not get_user(SimpleNamespace(session=store)).is_authenticated:
        return "Log in (or send an API token) before uploading. Nothing was read."
    origin = headers.get(b"origin", b"").decode("latin-1")
    if origin and not _same_site(origin, headers.get(b"host", b"").decode("latin-1")):
        return f"An upload from another site ({origin}) is refused. Nothing was read."
    if not cookies.get(settings.CSRF_COOKIE_NAME):
        return "No CSRF cookie: upload from grpo-web's own page. Nothing was read."
    return ""


def _cookies(header: str) -> dict[str, str]:
    pairs = (part.strip().partition("=") for part in header.split(";"))
    return {name: value for name, _, value in pairs if name}


def _same_site(origin: str, host: str) -> bool:
    parsed = urlparse(origin)
    return parsed.netloc == host or origin in settings.CSRF_TRUSTED_ORIGINS


def _too_large(limit: int, upload: bool) -> str:
    if upload:
        return (
            f"The request is larger than the upload limit ({limit - SLACK_BYTES} bytes, GRPO_MAX_UPLOAD_BYTES). "
            f"Nothing was saved."
        )
    return (
        f"The request is larger than this URL takes ({limit} bytes; only dataset uploads take more). Nothing was saved."
    )


async def _answer(send, status: int, text: str, as_json: bool) -> None:
    body = json.dumps({"detail": text}).encode() if as_json else text.encode()
    content_type = b"application/json" if as_json else b"text/plain; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"connection", b"close"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
