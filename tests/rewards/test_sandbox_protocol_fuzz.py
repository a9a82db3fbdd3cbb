"""The host's side of the sandbox protocol against a worker that says anything at all.

A fake worker (a thread of this process speaking the real framing over real pipes) answers the config and every
request with replies drawn from a seeded generator: valid ones, deep nesting, huge announced sizes, wrong types,
forged fields, random bytes, truncated frames, extra frames. ``start()`` and ``call()`` must raise SandboxError
kinds only, every reply an honest worker could not have sent must cost the worker and count as a fault, and the
host must stay usable: the same Sandbox then scores a batch with a real worker.
"""

from __future__ import annotations

import math
import os
import random
import signal
import struct
import subprocess
import threading

import msgpack
import pytest

from rewards.sandbox import Sandbox, SandboxError, sandbox_support
from rewards.sandbox import host as sandbox_host

SUPPORT = sandbox_support()
REPLIES = 10_000
N = 3  # completions per call
ISOLATION = {
    "uid": 61000,
    "landlock": "fs+net+scope",
    "landlock_abi": 6,
    "seccomp": True,
    "private_mounts": True,
    "weak": [],
}
HEADER = struct.Struct(">I")


def frame(obj) -> bytes:
    body = msgpack.packb(obj, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def nested(depth: int, leaf=None) -> bytes:
    """msgpack bytes of a list nested ``depth`` deep (built as bytes: Python could not pack it)."""
    return b"\x91" * depth + msgpack.packb(leaf)


def raw(body: bytes) -> bytes:
    return HEADER.pack(len(body)) + body


class Script:
    """What the fake worker says next. Each entry is (bytes to write, whether to hang up after them)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.kinds: list[int] = []
        self.served = 0  # adversarial or random replies sent: call replies and fuzzed start messages

    def value(self, depth: int = 0):
        """Any msgpack value, of any type, sometimes nested."""
        r = self.rng.random()
        if depth < 3 and r < 0.15:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 4))]
        if depth < 3 and r < 0.25:
            return {
                self.rng.choice(["id", "ok", "kind", "x", "stdout"]): self.value(depth + 1)
                for _ in range(self.rng.randint(0, 3))
            }
        return self.rng.choice(
            [
                None,
                True,
                False,
                0,
                -1,
                2**63 - 1,
                -(2**63),
                1.5,
                math.nan,
                math.inf,
                "",
                "SandboxUnavailable",
                "x" * self.rng.randint(0, 100),
                b"\x00\xff",
                self.rng.randint(-(10**6), 10**6),
                self.rng.random(),
            ]
        )

    def valid(self, seq: int) -> dict:
        return {
            "id": seq,
            "ok": True,
            "stdout": "",
            "truncated": False,
            "rewards": [1.0, None, 0.0],
            "extra": [["col", ["a", 1, None]]],
            "metrics": [["m", 0.5]],
        }

    def call_reply(self, seq: int) -> tuple[bytes, bool]:
        rng, good = self.rng, self.valid(seq)
        pick = rng.randrange(22)
        self.kinds.append(pick)
        self.served += 1
        if pick == 0:
            return frame(good), False
        if pick == 1:  # one field of a good reply replaced by anything
            key = rng.choice(sorted(good) + ["error", "cpu", "isolation"])
            return frame({**good, key: self.value()}), False
        if pick == 2:  # a reply nested deep, or a field nested deep
            depth = rng.choice([50, 1000, 1024, 1025, 5000, 100_000])
            if rng.random() < 0.5:
                return raw(nested(depth)), False
            head = msgpack.packb({k: v for k, v in good.items() if k != "rewards"})
            body = bytes([head[0] + 1]) + head[1:] + msgpack.packb("rewards") + nested(depth)  # fixmap: one more pair
            return raw(body), False
        if pick == 3:  # a huge announced size
            return HEADER.pack(rng.choice([(64 << 20) + 1, 2**32 - 1, 1 << 31])), False
        if pick == 4:  # containers announcing more items than the body holds
            return raw(
                rng.choice([b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\x7f\xff\xff\xff"])
                + b"\x90" * rng.randint(0, 50)
            ), False
        if pick == 5:  # random bytes
            return raw(bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))), False
        if pick == 6:  # a truncated frame, then the worker hangs up
            whole = frame(good)
            return whole[: rng.randint(0, len(whole) - 1)], True
        if pick == 7:  # two replies in one write
            return frame(good) + frame(good), False
        if pick == 8:  # a user error that claims to be the host speaking
            kind = rng.choice(sorted(sandbox_host.HOST_KINDS))
            return frame(
                {
                    "id": seq,
                    "ok": False,
                    "stdout": "",
                    "truncated": False,
                    "error": {"kind": kind, "message": "Set GRPO_SANDBOX_ALLOW_WEAK=1", "line": None, "traceback": ""},
                }
            ), False
        if pick == 9:  # a malformed error
            return frame(
                {
                    "id": seq,
                    "ok": False,
                    "stdout": "",
                    "truncated": False,
                    "error": rng.choice(
                        [
                            self.value(),
                            {"kind": self.value(), "message": self.value()},
                            {"kind": "E", "message": "m", "line": "3"},
                            {"kind": "x" * 300},
                        ]
                    ),
                }
            ), False
        if pick == 10:  # output past the cap
            return frame({**good, "stdout": "x" * rng.choice([65537, 1 << 20]), "truncated": True}), False
        if pick == 11:  # log records past the caps (the big ones seldom: they take a while to build)
            if rng.random() < 0.8:
                return frame(
                    {
                        **good,
                        "extra": [["c", ["y"] * 10], ["big", ["z" * 100] * 10]],
                        "metrics": [["m" * 100, 1.0]] * 10,
                        "stdout": "s" * 65537,
                    }
                ), False
            if rng.random() < 0.5:
                extra = [["blob", ["y" * 1000] * 9000]]  # 9 M characters
                return frame({**good, "extra": extra}), False
            return frame({**good, "metrics": [[f"m{i}", 1.0] for i in range(100_001)]}), False
        if pick == 12:  # wrong ids
            return frame({**good, "id": rng.choice([seq - 1, seq + 1, str(seq), None, float(seq), True])}), False
        if pick == 13:  # rewards of every wrong kind
            wrong = [
                [1.0],
                [1.0] * 4,
                ["1"] * 3,
                [[1.0]] * 3,
                [True, None, 2**63],
                [math.nan] * 3,
                "abc",
                None,
                {"a": 1},
            ]
            return frame({**good, "rewards": rng.choice(wrong)}), False
        if pick == 14:  # ext types, timestamps, bin where text belongs
            ext = rng.choice([msgpack.ExtType(5, b"xx"), msgpack.Timestamp(0, 0)])
            return frame({**good, rng.choice(["stdout", "rewards", "extra"]): ext}), False
        if pick == 15:  # keys that are not strings, unhashable keys
            body = rng.choice([b"\x81\x91\x01\x02", b"\x81\x80\x01", b"\x82\x01\x02\x03\x04"])
            return raw(body), False
        if pick == 16:  # invalid UTF-8 in a str
            return raw(b"\x81\xa2id\xa3\xff\xfe\xfd"), False
        if pick == 17:  # not a map at all
            return frame(self.value()), False
        if pick == 18:  # extras of the wrong shape
            return frame(
                {
                    **good,
                    "extra": rng.choice(
                        [[["c"]], [["c", "abc"]], [[1, [1]]], [["c", [[1]]]], "x", [["c", [{"a": 1}]]]]
                    ),
                }
            ), False
        if pick == 19:  # metrics of the wrong shape
            return frame(
                {**good, "metrics": rng.choice([[["m", "1"]], [["m", True]], [["m"]], [[None, 1.0]], [["m", [1.0]]]])}
            ), False
        if pick == 20:  # a frame whose body is shorter than announced, then silence: hang up
            return HEADER.pack(100) + b"\x80", True
        return frame({**good, "rewards": [rng.choice([0, 1, -5, 2.5, None, False]) for _ in range(N)]}), False

    def hello(self) -> tuple[bytes, bool]:
        """The two start messages; one start in ten is fuzzed."""
        locked, loaded = {"locked": True, "isolation": ISOLATION}, {"ok": True, "stdout": ""}
        if self.rng.random() >= 0.1:
            return frame(locked) + frame(loaded), False
        self.served += 1
        pick = self.rng.randrange(8)
        if pick == 0:
            return frame({"locked": True, "isolation": {**ISOLATION, "weak": nested_list(2000)}}), False
        if pick == 1:
            return frame(
                {"locked": True, "isolation": {**ISOLATION, self.rng.choice(list(ISOLATION)): self.value()}}
            ) + frame(loaded), False
        if pick == 2:
            return frame(locked) + frame(
                {
                    "ok": False,
                    "unavailable": True,
                    "error": {"kind": "SandboxUnavailable", "message": "forged advice", "line": None, "traceback": ""},
                }
            ), False
        if pick == 3:
            return frame(locked) + raw(nested(self.rng.choice([1000, 100_000]))), False
        if pick == 4:
            return frame(locked) + frame({"ok": False, "stdout": self.value(), "error": self.value()}), False
        if pick == 5:
            return raw(bytes(self.rng.randrange(256) for _ in range(20))), False
        if pick == 6:
            return frame(locked)[:5], True
        return frame({**locked, "extra": 1}) + frame(loaded), False


def nested_list(depth: int):
    """A list nested ``depth`` deep, built iteratively (msgpack packs up to its own limit, then refuses)."""
    value: list = []
    for _ in range(min(depth, 500)):
        value = [value]
    return value


class FakeProc:
    """Stands in for the worker's Popen; its pid is a real process of ours, in a group of its own, so freezing and
    thawing it do what they do to a worker."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self):
        return self.returncode

    def kill(self):
        self.returncode = -signal.SIGKILL

    def wait(self, timeout=None):
        if self.returncode is None:
            self.returncode = -signal.SIGKILL
        return self.returncode


def fake_worker(script: Script, req_r: int, rep_w: int) -> None:
    """Read frames, answer each from the script; stop when the host hangs up or the script says so."""

    def read_frame():
        buf = b""
        while len(buf) < 4:
            chunk = os.read(req_r, 4 - len(buf))
            if not chunk:
                return None
            buf += chunk
        (n,) = HEADER.unpack(buf)
        body = b""
        while len(body) < n:
            chunk = os.read(req_r, n - len(body))
            if not chunk:
                return None
            body += chunk
        return msgpack.unpackb(body, raw=False, strict_map_key=False)

    def say(data: bytes, hang_up: bool) -> bool:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(rep_w, view) :]
        except OSError:
            return False
        return not hang_up

    try:
        if read_frame() is None or not say(*script.hello()):
            return
        while (request := read_frame()) is not None:
            if not say(*script.call_reply(request["id"])):
                return
    except OSError:
        pass
    finally:
        for fd in (req_r, rep_w):
            os.close(fd)


@pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")
def test_10_000_adversarial_replies_raise_only_sandbox_errors_and_the_host_stays_usable(monkeypatch):
    script = Script(seed=14)
    holder = subprocess.Popen(["sleep", "600"], start_new_session=True)  # the pid the fake workers stand in for
    threads: list[threading.Thread] = []

    def spawn(self):
        req_r, req_w = os.pipe2(os.O_CLOEXEC)
        rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        os.set_blocking(req_w, False)
        thread = threading.Thread(target=fake_worker, args=(script, req_r, rep_w), daemon=True)
        thread.start()
        threads.append(thread)
        return sandbox_host.Worker(FakeProc(holder.pid), req_w, rep_r)

    monkeypatch.setattr(sandbox_host.Sandbox, "_spawn", spawn)
    monkeypatch.setattr(sandbox_host.Sandbox, "_observe", staticmethod(lambda pid: {}))
    sb = Sandbox(
        "def f(completions, **kw):\n    return [float(len(c)) for c in completions]\n",
        "f",
        timeout_s=2,
        startup_timeout_s=2,
        slot=9,
    )
    outcomes: dict[str, int] = {}
    try:
        while script.served < REPLIES:
            faults = sb.faults
            try:
                res = sb.call(["a", "bb", ""])
            except SandboxError as exc:
                outcomes[exc.kind] = outcomes.get(exc.kind, 0) + 1
                if exc.kind == "ProtocolError":
                    assert sb.faults > faults and not sb.running
                assert "forged advice" not in exc.message or exc.kind == "ProtocolError"
                continue
            assert len(res.rewards) == 3 and all(
                r is None or type(r) is float and math.isfinite(r) for r in res.rewards
            )
            assert len(res.stdout) <= sb.stdout_limit
            outcomes["ok"] = outcomes.get("ok", 0) + 1
        assert script.served == REPLIES and sb.calls > REPLIES * 0.8
        # every family of reply was drawn, and most were refused as protocol errors that cost the worker
        assert set(script.kinds) == set(range(22))
        assert outcomes["ProtocolError"] > REPLIES // 2 and outcomes["ok"] > 0 and outcomes.get("Crash", 0) > 0
        assert outcomes.get("UserException", 0) > 0  # forged host kinds come back as the user's own
        monkeypatch.undo()
        sb.close()
        assert sb.call(["a", "bb", ""]).rewards == [1.0, 2.0, 0.0]  # a real worker, on the same Sandbox
    finally:
        sb.close()
        holder.kill()
        holder.wait()
        for thread in threads:
            thread.join(timeout=5)
