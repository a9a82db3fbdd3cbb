"""An ASGI wrapper that limits a request body by URL before it is read.

Django's ASGI handler spools the whole body to a temporary file before any view, upload handler, login or CSRF check
runs, so a limit checked there comes after the disk is already full. Here:

- only the upload endpoints (a dataset, or a version of one, or a run's files to import, from the page or the API) take bodies up to the upload
  limit (GRPO_MAX_UPLOAD_BYTES), and only from a logged-in user or a live API token, and from a browser only when the
  request comes from this site's own pages (its Origin): anyone else gets 403 before a byte is read;
- every other URL takes what a form or a JSON body needs (Django's DATA_UPLOAD_MAX_MEMORY_SIZE and a little room);
- a declared Content-Length over the URL's limit is answered 413 without passing the body on, and a body that
  streams past it without declaring its size is cut off and answered 413. Answers under /api/ are JSON;
- a body is read against time as well as bytes (a lying Content-Length, a trickle): it must arrive within
  GRPO_BODY_TIMEOUT seconds plus a second per GRPO_BODY_MIN_RATE bytes received, as Apache's mod_reqtimeout bounds
  it, or the request is answered 408 and its connection closed; and at most GRPO_MAX_BODIES_IN_FLIGHT bodies are
  read at once: the next request with a body is answered 503 (Retry-After) before a byte is read. Requests without
  a body (a page, a poll) are never held back by them.

A client that sends its whole body before it reads the answer (Python's urllib, the attach client's transport) sees
a reset, not the 413, when the server closes with the body unread: so a body of up to twice the URL's limit (and
DRAIN_BYTES) is read to its end and dropped, for DRAIN_SECONDS at most and while bytes keep coming, before the 413
goes out; a larger one is answered unread.
"""

from __future__ import annotations

import asyncio
import json
import re
from types import SimpleNamespace
from urllib.parse import urlparse

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.sessions.backends.base import SessionBase
from django.utils.module_loading import import_string

from grpo_web.dbdown import DB_ERRORS, MESSAGE, RETRY_AFTER_SECONDS
from runs.accounts.services import token_user

SLACK_BYTES = 1024**2  # multipart boundaries and the form's other fields, around the file itself
# a dataset (or a version of one), and a run's files to import (runs.attach.importing), from the page or the API
UPLOAD_PATHS = re.compile(
    r"/datasets/(?:\d+/)?upload/|/api/datasets(?:/\d+/versions)?/?|/runs/import-files/|/api/runs/import/upload"
)
ATTACH_PATHS = re.compile(r"/api/attach/runs/\d+/events")  # an attach client's batches: a token, no browser
SHARD_PATHS = re.compile(r"/api/attach/runs/\d+/tokens/\d+")  # and its token shards
DRAIN_BYTES = 256 * 1024**2  # at most, of a body past its limit, read and dropped so that the client reads the 413
DRAIN_SECONDS = 30.0
DRAIN_IDLE_SECONDS = 2.0  # a client that sends nothing more (it waits for the answer first) is answered then


class BodyLimit:
    def __init__(self, app, max_bytes: int | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.reading = 0  # bodies being read now, in this process

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
            try:
                status, refusal = await sync_to_async(_upload_refusal)(
                    headers, ("write", "attach") if attach else ("write",), json_answers
                )
            except DB_ERRORS:  # the token or the session could not be read: the database is away
                return await _answer(send, 503, MESSAGE, json_answers, retry_after=RETRY_AFTER_SECONDS)
            if refusal:
                return await _answer(send, status, refusal, json_answers)
        if declared is not None and declared > limit:
            if declared <= min(2 * limit, DRAIN_BYTES):
                await _drain(receive, declared)
            return await _answer(send, 413, _too_large(limit, upload), json_answers)
        if declared == 0:
            return await self.app(scope, receive, send)
        if self.reading >= settings.GRPO_MAX_BODIES_IN_FLIGHT:
            return await _answer(
                send,
                503,
                f"The server is reading {self.reading} request bodies already (GRPO_MAX_BODIES_IN_FLIGHT); "
                f"send again in a few seconds. Nothing was read.",
                json_answers,
                retry_after=5,
            )
        received, started, cut, late, reading = 0, False, False, False, True
        self.reading += 1
        loop = asyncio.get_running_loop()
        began = loop.time()

        def done_reading():
            nonlocal reading
            if reading:
                reading = False
                self.reading -= 1

        async def counted_receive():
            nonlocal received, cut, late
            if not reading:  # the body is in: what follows is Django listening for a disconnect, unbounded
                return await receive()
            deadline = began + settings.GRPO_BODY_TIMEOUT + received / settings.GRPO_BODY_MIN_RATE
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                late = True
                done_reading()
                return {"type": "http.disconnect"}  # Django stops reading: RequestAborted
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    cut = True
                    done_reading()
                    return {"type": "http.disconnect"}
                if not message.get("more_body", False):
                    done_reading()
            else:
                done_reading()
            return message

        async def watched_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        finally:
            done_reading()
        if cut and not started:
            await _drain(receive, min(2 * limit, DRAIN_BYTES) - received)
            await _answer(send, 413, _too_large(limit, upload), json_answers)
        elif late and not started:
            await _answer(
                send,
                408,
                f"The request body did not arrive in time ({received} bytes in {loop.time() - began:.0f} s; "
                f"GRPO_BODY_TIMEOUT, GRPO_BODY_MIN_RATE). Nothing was saved.",
                json_answers,
            )


async def _drain(receive, most: int) -> None:
    """Read the rest of the request body and drop it: ``most`` bytes, for DRAIN_SECONDS, at most, and only while the
    client sends (a pause of DRAIN_IDLE_SECONDS ends it: a client that declared a length and waits for the answer
    gets it then)."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            while most > 0:
                message = await asyncio.wait_for(receive(), DRAIN_IDLE_SECONDS)
                if message["type"] != "http.request":
                    return
                most -= len(message.get("body", b""))
                if not message.get("more_body", False):
                    return
    except TimeoutError:
        return


def _upload_refusal(headers: dict, scopes: tuple[str, ...] = ("write",), api: bool = False) -> tuple[int, str]:
    """Why a large upload may not be read, and the status to answer ((0, "") when it may): it needs a live API token
    (401 for one that is not), or a logged-in user whose browser sent it from this site's pages (403; 401 under
    /api/, ``api``, with no credentials at all). Django checks the CSRF token itself once the body is read."""
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    if authorization[:7].lower() == "bearer ":
        found = token_user(authorization[7:].strip())
        if found is None:
            return 401, "Authorization: not a live token (unknown, revoked, or its user deactivated). Nothing was read."
        if found[1] not in scopes:
            return 403, f"Uploads need a {' or '.join(scopes)} token, not a {found[1]} one. Nothing was read."
        return 0, ""
    cookies = _cookies(headers.get(b"cookie", b"").decode("latin-1"))
    session_key = cookies.get(settings.SESSION_COOKIE_NAME, "")
    store: SessionBase = import_string(settings.SESSION_ENGINE).SessionStore(session_key or None)
    if not session_key or not get_user(SimpleNamespace(session=store)).is_authenticated:
        return 401 if api else 403, "Log in (or send an API token) before uploading. Nothing was read."
    origin = headers.get(b"origin", b"").decode("latin-1")
    if origin and not _same_site(origin, headers.get(b"host", b"").decode("latin-1")):
        return 403, f"An upload from another site ({origin}) is refused. Nothing was read."
    if not cookies.get(settings.CSRF_COOKIE_NAME):
        return 403, "No CSRF cookie: upload from grpo-web's own page. Nothing was read."
    return 0, ""


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


async def _answer(send, status: int, text: str, as_json: bool, retry_after: int | None = None) -> None:
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
                *([(b"retry-after", str(retry_after).encode())] if retry_after else []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
