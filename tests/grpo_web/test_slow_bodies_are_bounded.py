"""Through the real web server (uvicorn): a request body that never arrives (a Content-Length that lies) or arrives a
byte at a time is answered 408 and its connection closed once its time is up (GRPO_BODY_TIMEOUT, GRPO_BODY_MIN_RATE),
and no more than GRPO_MAX_BODIES_IN_FLIGHT slow bodies are held at once: the next is answered 503 at once, and a page
is answered meanwhile. Loopback only; every wait is bounded."""

from __future__ import annotations

import select
import socket
import time
import urllib.request
from urllib.parse import urlparse

import pytest

from tests.conftest import running_web_server

pytestmark = pytest.mark.django_db(transaction=True)

BOUND = 60  # seconds a test waits for the server at most; the server's own bound is GRPO_BODY_TIMEOUT (2 s here)
CAP = 3


@pytest.fixture(scope="module")
def server(service_env, tmp_path_factory):
    env = {**service_env, "GRPO_BODY_TIMEOUT": "2", "GRPO_BODY_MIN_RATE": "1024", "GRPO_MAX_BODIES_IN_FLIGHT": str(CAP)}
    with running_web_server(env, tmp_path_factory.mktemp("slow") / "web.log") as url:
        yield url


def _open(url: str, declared: int, first: bytes = b"") -> socket.socket:
    """A POST to the login form that declares ``declared`` bytes and sends ``first`` of them."""
    parsed = urlparse(url)
    sock = socket.create_connection((parsed.hostname, parsed.port), timeout=BOUND)
    head = (
        f"POST /login/ HTTP/1.1\r\nHost: {parsed.netloc}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    )
    sock.sendall(head.encode() + first)
    return sock


def _answered(sock: socket.socket, wait: float) -> bool:
    return bool(select.select([sock], [], [], wait)[0])


def _answer_then_close(sock: socket.socket) -> tuple[int, bytes]:
    """The answer's status and what came with it, read until the server closes the connection (bounded by BOUND)."""
    data = b""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            return int(data.split(b" ", 2)[1]), data
        data += chunk
    raise AssertionError(f"the connection was still open after {BOUND} s: {data[:200]!r}")


def test_a_lying_content_length_is_answered_408_and_closed(server):
    with _open(server, declared=1_000_000, first=b"username=a") as sock:
        status, answer = _answer_then_close(sock)
    assert status == 408, answer
    assert b"did not arrive in time" in answer


def test_a_trickle_is_answered_408_and_closed(server):
    with _open(server, declared=1_000_000) as sock:
        sent, deadline = 0, time.monotonic() + BOUND
        while not _answered(sock, 0.1):  # a byte every tenth of a second, until the server answers
            assert time.monotonic() < deadline, f"still reading after {BOUND} s ({sent} bytes)"
            try:
                sock.sendall(b"x")
            except OSError:  # closed while a byte was on its way: the answer is there to read
                break
            sent += 1
        status, answer = _answer_then_close(sock)
    assert status == 408, answer
    assert sent > 0


def test_many_slow_bodies_hold_no_more_than_the_cap_and_a_page_is_answered_meanwhile(server):
    held = []
    try:
        for _ in range(CAP):
            held.append(_open(server, declared=1_000_000, first=b"u"))
            assert not _answered(held[-1], 0.3)  # being read (and counted) by now
        extra = [_open(server, declared=1_000_000, first=b"u") for _ in range(20)]
        for sock in extra:
            with sock:
                status, answer = _answer_then_close(sock)
            assert status == 503, answer
            assert b"retry-after: 5" in answer.lower()
        with urllib.request.urlopen(f"{server}/login/", timeout=BOUND) as page:
            assert page.status == 200
        statuses = []
        for sock in held:
            statuses.append(_answer_then_close(sock)[0])
        assert statuses == [408] * CAP
    finally:
        for sock in held:
            sock.close()
    # their time up, a body is read again: the form answers (403: no CSRF cookie), not 503
    with _open(server, declared=10, first=b"username=a") as sock:
        assert _answer_then_close(sock)[0] == 403
