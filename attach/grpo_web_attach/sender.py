"""The spool's sender: a daemon thread that sends the bytes of the spool (an event log) the server has not taken,
gzip'd, with the byte offset they start at, and keeps the offset the server acknowledged beside the spool.

Training never waits for it: a server that is down or slow is retried with backoff while the spool grows on disk.
Only whole lines are sent; the server appends only bytes past what it has taken (a batch sent twice is acknowledged,
not stored twice) and answers 409 with the offset it expects when something in between is missing."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

BATCH_BYTES = 4 * 1024**2  # raw spool bytes per request (whole lines; a longer line goes alone)
HEARTBEAT_S = 10.0
SEND_EVERY_S = 1.0  # once caught up, the next batch waits this long for lines to gather (flush does not)
TIMEOUT_S = 30.0


class Refused(Exception):
    """The server answered 4xx (but 409): the request itself is wrong; retrying would not help."""


class Api:
    """The few calls of grpo-web's attach API, over the standard library's HTTP."""

    def __init__(self, url: str, token: str, timeout: float = TIMEOUT_S):
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def call(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(
            f"{self.url}/api/attach{path}",
            data=body,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read() or b"{}")
            except ValueError:
                answer = {}
            if exc.code >= 500:
                raise  # the server's trouble: retried
            return exc.code, answer

    def json(self, method: str, path: str, payload: dict) -> tuple[int, dict]:
        return self.call(method, path, json.dumps(payload).encode())


def read_acked(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def whole_lines(path: Path, offset: int, limit: int) -> bytes:
    """The spool's complete lines from ``offset``, about ``limit`` bytes (more only for one longer line)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(limit)
        while data and b"\n" not in data:  # one line longer than the limit: read to its end
            more = fh.read(limit)
            if not more:
                break
            data += more
    end = data.rfind(b"\n")
    return data[: end + 1] if end >= 0 else b""


class Sender:
    def __init__(self, api: Api, run_id: int, resume_key: str, spool: Path, acked_path: Path, log=print):
        self.api, self.run_id, self.resume_key = api, run_id, resume_key
        self.spool, self.acked_path = spool, acked_path
        self.acked = read_acked(acked_path)
        self.log = log
        self.error: str | None = None  # a refusal: the server will not take this spool; sending stopped
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._hurry = threading.Event()  # flush or stop: send what there is now
        self._thread = threading.Thread(target=self._loop, name="grpo-web-attach", daemon=True)
        self._last_contact = 0.0

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def pending(self) -> int:
        try:
            return max(0, self.spool.stat().st_size - self.acked)
        except OSError:
            return 0

    def send_once(self) -> bool:
        """Send one batch of what the server has not taken; True when something moved."""
        data = whole_lines(self.spool, self.acked, BATCH_BYTES)
        if not data:
            if time.monotonic() - self._last_contact >= HEARTBEAT_S:
                self.api.json("POST", f"/runs/{self.run_id}/heartbeat", {"resume_key": self.resume_key})
                self._last_contact = time.monotonic()
            return False
        status, answer = self.api.call(
            "POST",
            f"/runs/{self.run_id}/events?offset={self.acked}",
            gzip.compress(data, compresslevel=1),
            {"Content-Encoding": "gzip", "Content-Type": "application/x-ndjson", "X-Resume-Key": self.resume_key},
        )
        if status == 409 and isinstance(answer.get("expected"), int):
            # the server has taken more (an acknowledgement lost) or less (a spool restored from a backup) than
            # this side thinks: send from where it stands
            self._ack(min(answer["expected"], self.spool.stat().st_size))
            return True
        if status >= 400:
            raise Refused(f"{status}: {answer.get('detail') or answer}")
        self._last_contact = time.monotonic()
        self._ack(answer["taken"])
        return True

    def _ack(self, offset: int) -> None:
        self.acked = offset
        write_atomic(self.acked_path, str(offset))

    def _loop(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                moved = self.send_once()
                backoff = 1.0
            except Refused as exc:
                self.error = str(exc)
                self.log(f"grpo-web: the server refused this run's events, sending stopped: {exc}")
                return
            except Exception as exc:  # the server down, slow or restarting: the spool keeps everything
                self.log(f"grpo-web: server not reached ({exc.__class__.__name__}); retrying in {backoff:.0f} s")
                self._hurry.wait(backoff)  # a new batch does not cut it short (flush and stop do)
                backoff = min(backoff * 2, 10.0)
                continue
            if not moved:
                self._wake.wait(1.0)
                self._wake.clear()
            elif self.pending() < BATCH_BYTES:
                # caught up: a request a generation batch would cost a server (and, on a shared machine, the
                # training) more than fewer, larger ones; the page is at most SEND_EVERY_S behind
                self._hurry.wait(SEND_EVERY_S)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the server to take the whole spool; True when it has."""
        deadline = time.monotonic() + timeout
        self._hurry.set()
        self.wake()
        while time.monotonic() < deadline:
            if self.pending() == 0 or self.error or not self._thread.is_alive():
                break
            time.sleep(0.1)
        return self.pending() == 0

    def stop(self) -> None:
        self._stop.set()
        self._hurry.set()
        self._wake.set()
        self._thread.join(timeout=TIMEOUT_S + 1)
