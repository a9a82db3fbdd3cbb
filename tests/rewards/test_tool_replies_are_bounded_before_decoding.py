"""A tool's (or an environment's) honest reply is one text of at most ``result_chars`` characters or one error: the
host refuses a longer one from the length in its header, before reading its body, and decodes no more than a
handful of objects. A forged reply of two million objects, or of 60 MB, costs the host almost nothing (measured
with tracemalloc: what the host's Python allocated while refusing it) and is a ProtocolError, a fault."""

from __future__ import annotations

import tracemalloc

import pytest

from rewards.sandbox import SandboxCrash, sandbox_support
from rewards.sandbox.tool import ToolSandbox

SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")

FORGER = '''
import os, sys, msgpack


def forge(seq: int, kind: str) -> str:
    """Write a forged reply to the host's pipe.

    Args:
        seq: The request's id.
        kind: objects, bytes or none.
    """
    if kind == "none":
        return "honest"
    result = [str(i) for i in range(2_000_000)] if kind == "objects" else "x" * 60_000_000
    body = msgpack.packb({"id": seq, "ok": True, "result": result}, use_bin_type=True)
    os.write(int(sys.argv[2]), len(body).to_bytes(4, "big") + body)
    return "honest"
'''


@pytest.mark.parametrize("kind", ["objects", "bytes"])
def test_a_forged_tool_reply_is_refused_before_the_host_builds_it(kind):
    with ToolSandbox(FORGER, "forge", slot=3962, timeout_s=30.0, memory_mb=2048) as tool:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            with pytest.raises(SandboxCrash) as refused:
                tool.invoke({"seq": tool._seq + 1, "kind": kind})
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
        assert peak < 4 << 20, f"the host allocated {peak} bytes to refuse it"
        assert refused.value.kind == "ProtocolError" and "the worker announced a reply of" in refused.value.message
        assert tool.faults == 1
        assert tool.invoke({"seq": 0, "kind": "none"}) == "honest"  # a fresh worker; the next call works
