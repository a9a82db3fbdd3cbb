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

from runs.accounts.services import token_create
from runs.models import Dataset, DatasetVersion
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
            "line 2, column 16: not UTF-8 text",
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


# Limits by URL: only the dataset upload endpoints take large bodies, and only from someone who may upload; the
# rest take what a form needs. Each is answered before the body is read.

FORM_LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1024**2
OFFERED = 64 * 1024**2


def post(url: str, path: str, headers: str = "", length: int = OFFERED, content_type: str = "text/plain"):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {urlparse(url).netloc}\r\n{headers}"
        f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n"
    )
    return send(url, head, (b"x" * 65536 for _ in range(length // 65536)))


@pytest.mark.parametrize("path", ["/login/", "/runs/new/", "/rewards/new/", "/api/runs", "/no/such/page/"])
def test_a_large_body_anywhere_but_an_upload_is_refused_unread(web_server, path):
    status, body, sent = post(web_server, path)
    assert status == 413
    text = json.loads(body)["detail"] if path.startswith("/api/") else body.decode()
    assert (
        text == f"The request is larger than this URL takes ({FORM_LIMIT} bytes; only dataset uploads take more). "
        "Nothing was saved."
    )
    assert sent < 16 * 1024**2  # of the 64 MB offered
    assert alive(web_server)


def test_a_logged_in_form_is_held_to_the_form_limit_too(web_server, owner):
    status, _, sent = post(web_server, "/runs/new/", headers=f"Cookie: {cookies(owner)}\r\n")
    assert status == 413 and sent < 16 * 1024**2


@pytest.mark.parametrize(
    "path, credentials, expected, message",
    [
        ("/datasets/upload/", "", 403, "Log in (or send an API token) before uploading. Nothing was read."),
        ("/datasets/1/upload/", "Cookie: sessionid=forged\r\n", 403, "Log in (or send an API token) before uploading."),
        ("/api/datasets", "Authorization: Bearer gwp_not-a-token\r\n", 401, "Authorization: not a live token"),
        ("/api/datasets/1/versions", "", 401, "Log in (or send an API token) before uploading."),
    ],
)
def test_an_upload_from_someone_who_may_not_upload_is_refused_unread(web_server, path, credentials, expected, message):
    before = stored_files()
    status, body, sent = post(web_server, path, headers=credentials, content_type="multipart/form-data; boundary=b")
    assert status == expected
    assert message in (json.loads(body)["detail"] if path.startswith("/api/") else body.decode())
    assert sent < 16 * 1024**2
    assert stored_files() == before and not Dataset.objects.exists()


def test_a_read_token_may_not_upload(web_server, owner):
    _, raw = token_create(owner=owner, name="ci", scope="read")
    status, body, sent = post(
        web_server, "/api/datasets", headers=f"Authorization: Bearer {raw}\r\n", content_type="multipart/form-data"
    )
    assert status == 403 and "write token" in json.loads(body)["detail"] and sent < 16 * 1024**2


def test_an_upload_sent_from_another_site_is_refused_unread(web_server, owner):
    status, body, sent = post(
        web_server,
        "/datasets/upload/",
        headers=f"Cookie: {cookies(owner)}\r\nOrigin: https://evil.example\r\n",
        content_type="multipart/form-data; boundary=b",
    )
    assert status == 403 and body.decode().startswith("An upload from another site (https://evil.example)")
    assert sent < 16 * 1024**2


def test_a_large_upload_from_the_users_own_page_is_stored(web_server, owner):
    rows = b"".join(json.dumps({"prompt": f"{i} " + "p" * 1000}).encode() + b"\n" for i in range(4000))
    body, content_type = multipart("big.jsonl", rows)
    assert len(body) > FORM_LIMIT
    head = (
        f"POST /datasets/upload/ HTTP/1.1\r\nHost: {urlparse(web_server).netloc}\r\nCookie: {cookies(owner)}\r\n"
        f"Origin: {web_server}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\n\r\n"
    )
    status, page, _ = send(web_server, head, [body[i : i + 65536] for i in range(0, len(body), 65536)], timeout=120)
    assert status in (200, 302), page[-2000:]
    assert DatasetVersion.objects.get(dataset__owner=owner, dataset__name="hostile").row_count == 4000
