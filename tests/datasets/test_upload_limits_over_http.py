"""Through the real web server (uvicorn, ASGI): a body over the upload limit is refused before it is read, a hostile
file is refused with its message, and the server goes on answering."""

from __future__ import annotations

import json
import select
import socket
import time
import urllib.request
from urllib.parse import urlparse

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore

from runs.models import Dataset
from tests.datasets.conftest import stored_files

pytestmark = pytest.mark.django_db(transaction=True)

CSRF = "a" * 32  # an unmasked CSRF secret: the cookie and the form field carry the same value


def cookies(user) -> str:
    session = SessionStore()
    session[SESSION_KEY], session[BACKEND_SESSION_KEY] = str(user.pk), "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}; {settings.CSRF_COOKIE_NAME}={CSRF}"


def multipart(filename: str, content: bytes) -> tuple[bytes, str]:
    boundary = "grpo-web-test-boundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in (
            ("csrfmiddlewaretoken", CSRF),
            ("source", "file"),
            ("name", "hostile"),
            ("prompt_column", "prompt"),
            ("gsm8k_column", ""),
        )
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n".encode()
        + content
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def send(url: str, head: str, body_chunks, timeout: float = 30) -> tuple[int, bytes, int]:
    """Send a request by hand; stop sending as soon as the server answers. (status, body, bytes of body sent)."""
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=timeout)
    sock.sendall(head.encode())
    sent = 0
    try:
        for chunk in body_chunks:
            if select.select([sock], [], [], 0)[0]:
                break  # the server has answered (or closed)
            sock.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    response = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        response += data
        if b"\r\n\r\n" in response:
            head_part, _, rest = response.partition(b"\r\n\r\n")
            length = [
                int(line.split(b":")[1])
                for line in head_part.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ]
            if length and len(rest) >= length[0]:
                break
    sock.close()
    status = int(response.split(b" ", 2)[1]) if response else 0
    return status, response.partition(b"\r\n\r\n")[2], sent


def alive(url: str) -> bool:
    return urllib.request.urlopen(url + "/login/", timeout=5).status == 200


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(small_limit_server, owner):
    head = (
        f"POST /datasets/upload/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies(owner)}\r\n"
        f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {302 * 1024**2}\r\n\r\n"
    )
    status, body, sent = send(small_limit_server, head, (b"x" * 65536 for _ in range(302 * 16)))
    assert status == 413
    assert (
        body.decode() == f"The request is larger than the upload limit ({1024**2} bytes, GRPO_MAX_UPLOAD_BYTES). "
        f"Nothing was saved."
    )
    assert sent < 32 * 1024**2  # answered long before the 302 MB were sent
    assert alive(small_limit_server)


def test_a_chunked_body_that_streams_past_the_limit_is_cut_off(small_limit_server, owner):
    before = stored_files()
    head = (
        f"POST /datasets/upload/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies(owner)}\r\n"
        f"Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n" % 65536 + b"y" * 65536 + b"\r\n"
    status, body, sent = send(small_limit_server, head, (chunk for _ in range(200 * 16)))
    assert status == 413 and b"larger than the upload limit" in body
    assert sent < 64 * 1024**2  # of the 200 MB offered
    assert not Dataset.objects.exists() and stored_files() == before
    assert alive(small_limit_server)


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "deep.jsonl",
            ('{"prompt": "x", "v": ' + "[" * 100_000 + "]" * 100_000 + "}\n").encode(),
            "line 1: values are nested more than 32 levels deep, the limit",
        ),
        (
            "latin.jsonl",
            b'{"prompt": "ok"}\n' + '{"prompt": "café"}\n'.encode("latin-1"),
            "line 2: not UTF-8 text (byte 15)",
        ),
        (
            "wide.jsonl",
            (json.dumps({"prompt": "x", **{f"c{i}": i for i in range(5000)}}) + "\n").encode(),
            "line 1: 5001 columns; the limit is 1000",
        ),
    ],
)
def test_a_hostile_upload_is_refused_and_the_server_goes_on(web_server, owner, name, content, message):
    before = stored_files()
    body, content_type = multipart(name, content)
    head = (
        f"POST /datasets/upload/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookies(owner)}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    status, page, _ = send(web_server, head, [body])
    assert status == 400
    assert message in page.decode()
    assert not Dataset.objects.exists() and stored_files() == before
    assert alive(web_server)
