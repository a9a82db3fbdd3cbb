"""The spool's sender: a daemon thread that sends the bytes of the spool (an event log) the server has not taken,
gzip'd, with the byte offset they start at, and keeps the offset the server acknowledged beside the spool.

Training never waits for it: a server that is down or slow is retried with backoff while the spool grows on disk.
Only whole lines are sent; the server appends only bytes past what it has taken (a batch sent twice is acknowledged,
not stored twice) and answers 409 with the offset it expects when something in between is missing.

Token shards (``attach(..., token_sample_groups=N)``: one Parquet file per optimizer step in the spool's ``tokens/``
folder, each written whole by a rename) go once the event log is caught up, one a request, to the run's
``tokens/<step>``; the server stores a step's shard whole, in place of any it had, so one sent twice is stored once.
A sent shard leaves the spool; one the server refuses (4xx) is moved to ``tokens/refused/`` and named in the log."""

from __future__ import annotations

import gzip
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

BATCH_BYTES = 4 * 1024**2  # raw spool bytes per request (whole lines; a longer line goes alone)
HEARTBEAT_S = 10.0
MAX_BACKOFF_S = 10.0  # the longest wait between two tries of a server that is not reached
SEND_EVERY_S = 1.0  # once caught up, the next batch waits this long for lines to gather (flush does not)
TIMEOUT_S = 30.0
SHARD = re.compile(r"step-(\d{6,})\.parquet")  # grpo_web_attach.tokens.shard_name


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


def shard_step(path: Path) -> int | None:
    """The optimizer step of a token shard's file (``step-NNNNNN.parquet``), None for any other file."""
    match = SHARD.fullmatch(path.name)
    return int(match.group(1)) if match else None


def pending_shards(folder: Path | None) -> list[Path]:
    """The finished token shards in ``folder`` (a shard being written has a temporary name), by step."""
    try:
        found = [(shard_step(p), p) for p in folder.iterdir()] if folder is not None else []
    except OSError:  # no folder yet
        return []
    return [p for step, p in sorted((s, p) for s, p in found if s is not None) if p.is_file()]


def _identity(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns, st.st_size


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


class Prepared(threading.Thread):
    """The batch at ``offset`` read and gzip'd on a thread of its own (zlib lets go of the GIL while it compresses),
    so that a spool that has fallen behind is sent as fast as the server takes it."""

    def __init__(self, spool: Path, offset: int):
        super().__init__(name="grpo-web-attach-prepare", daemon=True)
        self.spool, self.offset = spool, offset
        self.data = self.body = b""
        self.start()

    def run(self) -> None:
        try:
            self.data = whole_lines(self.spool, self.offset, BATCH_BYTES)
            self.body = gzip.compress(self.data, compresslevel=1) if self.data else b""
        except OSError:  # the spool went (a new run): the sender reads it again itself
            self.data = self.body = b""


class Sender:
    def __init__(
        self,
        api: Api,
        run_id: int,
        resume_key: str,
        spool: Path,
        acked_path: Path,
        log=print,
        shards: Path | None = None,
    ):
        self.api, self.run_id, self.resume_key = api, run_id, resume_key
        self.spool, self.acked_path, self.shards = spool, acked_path, shards
        self.acked = read_acked(acked_path)
        self.log = log
        self.error: str | None = None  # a refusal: the server will not take this spool; sending stopped
        self.unreached: str | None = None  # why the server is not reached now (said once, not at each retry)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._hurry = threading.Event()  # flush or stop: a caught-up sender sends what there is now
        self._thread = threading.Thread(target=self._loop, name="grpo-web-attach", daemon=True)
        self._last_contact = 0.0
        self._prepared: Prepared | None = None  # the next batch, read and gzip'd while a request is in flight

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def pending(self) -> int:
        """Bytes the server has not taken: of the event log, and the token shards not sent."""
        try:
            events = max(0, self.spool.stat().st_size - self.acked)
        except OSError:
            events = 0
        shards = 0
        for path in pending_shards(self.shards):
            try:
                shards += path.stat().st_size
            except OSError:  # sent (and removed) meanwhile
                pass
        return events + shards

    def send_once(self) -> bool:
        """Send one batch of what the server has not taken (the event log first, then a token shard); True when
        something moved."""
        data, body = self._batch_at(self.acked)
        if not data:
            shards = pending_shards(self.shards)
            if shards:
                self.send_shard(shards[0])
                return True
            if time.monotonic() - self._last_contact >= HEARTBEAT_S:
                self.api.json("POST", f"/runs/{self.run_id}/heartbeat", {"resume_key": self.resume_key})
                self._last_contact = time.monotonic()
            return False
        if self.pending() > len(data):  # more waits: have it ready when the server answers
            self._prepared = Prepared(self.spool, self.acked + len(data))
        status, answer = self.api.call(
            "POST",
            f"/runs/{self.run_id}/events?offset={self.acked}",
            body,
            {"Content-Encoding": "gzip", "Content-Type": "application/x-ndjson", "X-Resume-Key": self.resume_key},
        )
        if status == 409 and isinstance(answer.get("expected"), int):
            # the server has taken more (an acknowledgement lost) or less (a spool restored from a backup) than
            # this side thinks: send from where it stands
            expected = min(answer["expected"], self.spool.stat().st_size)
            if expected == self.acked:  # it expects what was sent: not a lost acknowledgement, so retried later
                raise ConnectionError(f"409 at offset {self.acked}: {answer.get('detail') or answer}")
            self._ack(expected)
            return True
        if status >= 400:
            raise Refused(f"{status}: {answer.get('detail') or answer}")
        self._last_contact = time.monotonic()
        self._ack(answer["taken"])
        return True

    def _batch_at(self, offset: int) -> tuple[bytes, bytes]:
        """The spool's batch at ``offset`` and its gzip'd body: the one prepared while the last request was in flight
        when it is for this offset (the server took what was sent), else read now."""
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.join()
            if prepared.offset == offset and prepared.data:
                return prepared.data, prepared.body
        data = whole_lines(self.spool, offset, BATCH_BYTES)
        return data, gzip.compress(data, compresslevel=1) if data else b""

    def send_shard(self, path: Path) -> None:
        """Send one token shard, as its file is; then it leaves the spool (or, refused, goes to ``refused/``). A shard
        written again while it was sent (a step trained again) stays, to be sent again."""
        try:
            before, data = _identity(path), path.read_bytes()  # Parquet, compressed already
        except FileNotFoundError:  # dropped meanwhile (a resume from an earlier checkpoint)
            return
        status, answer = self.api.call(
            "PUT",
            f"/runs/{self.run_id}/tokens/{shard_step(path)}",
            data,
            {"Content-Type": "application/vnd.apache.parquet", "X-Resume-Key": self.resume_key},
        )
        self._last_contact = time.monotonic()
        try:
            if _identity(path) != before:
                return
            if status >= 400:
                refused = path.parent / "refused"
                refused.mkdir(exist_ok=True)
                os.replace(path, refused / path.name)
                why = answer.get("detail") or answer
                self.log(f"grpo-web: the server refused token shard {path.name}, kept in {refused}: {status}: {why}")
                return
            path.unlink()
        except FileNotFoundError:
            pass

    def _ack(self, offset: int) -> None:
        self.acked = offset
        write_atomic(self.acked_path, str(offset))

    def _loop(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                moved = self.send_once()
            except Refused as exc:
                self.error = str(exc)
                self.log(f"grpo-web: the server refused this run's events, sending stopped: {exc}")
                return
            except Exception as exc:  # the server down, slow or restarting: the spool keeps everything
                if self.unreached is None:  # said once; the retries are quiet
                    self.log(
                        f"grpo-web: server not reached ({exc.__class__.__name__}); the spool keeps everything, "
                        f"retried every {MAX_BACKOFF_S:.0f} s at most"
                    )
                self.unreached = exc.__class__.__name__
                # backoff in every state: neither a new batch nor a flush cuts it short (only stop does)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = 1.0
            if self.unreached is not None:
                self.unreached = None
                self.log("grpo-web: server reached again; sending what the spool holds")
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
            time.sleep(0.2)
        return self.pending() == 0

    def stop(self) -> None:
        self._stop.set()
        self._hurry.set()
        self._wake.set()
        self._thread.join(timeout=TIMEOUT_S + 1)
