"""Decoding a worker's reply is bounded before Python objects are built: msgpack reads each array's and map's length
from its header and refuses one past the limits (a map of more than 64 keys, bin or ext objects, which an honest
worker never sends), and a reward call's reply may decode into no more objects than its rewards and the logging caps
need. A hostile reply is refused as a ProtocolError instead of being decoded for seconds outside any time limit."""

from __future__ import annotations

import msgpack
import pytest

from rewards.sandbox import Sandbox, SandboxCrash, sandbox_support
from rewards.sandbox.errors import WorkerLost
from rewards.sandbox.replies import CALL_REPLY_ITEMS, MAX_REPLY_MAP, decode

SUPPORT = sandbox_support()

GOOD = {"id": 1, "ok": True, "stdout": "", "truncated": False, "rewards": [1.0, 2.0], "extra": [], "metrics": []}


def test_an_honest_reply_decodes():
    assert decode(msgpack.packb(GOOD, use_bin_type=True), 2 + CALL_REPLY_ITEMS) == GOOD


@pytest.mark.parametrize(
    "hostile, why",
    [
        ({**GOOD, "junk": {i: 0 for i in range(1_000_000)}}, f"1000000 exceeds max_map_len({MAX_REPLY_MAP})"),
        ({**GOOD, "junk": {str(i): 0 for i in range(MAX_REPLY_MAP + 1)}}, "exceeds max_map_len"),
        ({**GOOD, "stdout": b"x" * 1000}, "exceeds max_bin_len(0)"),
    ],
)
def test_a_map_past_64_keys_or_a_bin_object_is_refused_from_its_header(hostile, why):
    with pytest.raises(WorkerLost) as refused:
        decode(msgpack.packb(hostile, use_bin_type=True))
    assert refused.value.kind == "ProtocolError" and why in refused.value.message


def test_a_reply_past_its_object_budget_is_refused():
    body = msgpack.packb({**GOOD, "junk": [[i] for i in range(1000)]}, use_bin_type=True)
    assert decode(body, 3000)["junk"][999] == [999]
    with pytest.raises(WorkerLost) as refused:
        decode(body, 1500)
    assert "more than 1500 objects" in refused.value.message
    with pytest.raises(WorkerLost) as refused:
        decode(msgpack.packb({**GOOD, "junk": list(range(1501))}), 1500)
    assert "1501 exceeds max_array_len(1500)" in refused.value.message


@pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")
def test_a_reward_call_reply_may_decode_into_what_its_rewards_and_logs_need_only():
    # 1.9 million short strings: within the 2 million objects any reply could decode into before
    source = (
        "import os, sys, msgpack\n"
        "def f(completions, seq, **kwargs):\n"
        "    reply = {'id': seq[0], 'ok': True, 'stdout': '', 'truncated': False, 'rewards': [0.0] * len(completions),\n"
        "             'extra': [['c', [str(i) for i in range(1_900_000)]]], 'metrics': []}\n"
        "    body = msgpack.packb(reply, use_bin_type=True)\n"
        "    os.write(int(sys.argv[2]), len(body).to_bytes(4, 'big') + body)\n"
        "    return [0.0] * len(completions)\n"
    )
    with Sandbox(source, "f", slot=3950, timeout_s=20.0) as sb:
        with pytest.raises(SandboxCrash) as refused:
            sb.call(["a", "b"], seq=[sb._seq + 1] * 2)
        assert refused.value.kind == "ProtocolError" and "exceeds max_array_len" in refused.value.message
        assert sb.faults == 1
