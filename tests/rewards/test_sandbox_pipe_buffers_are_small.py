"""Pipe buffers are kernel memory outside the worker's RLIMIT_AS. The host's two pipes are only as large as their
traffic needs (256 KiB for requests, 64 KiB for replies), and the worker cannot grow a pipe (``F_SETPIPE_SZ``
denied) or pin its pages in one (``vmsplice`` denied): filling every pipe its descriptor limit allows pins about
2 MiB, where 1 MiB pipes pinned about 29 MiB."""

from __future__ import annotations

import pytest

from rewards.sandbox import Sandbox, SandboxError, sandbox_support

SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")


SOURCE = """
import ctypes, errno, fcntl, os, sys

def own_pipes(completions, **kwargs):
    '''The worker's pipes to the host, by size; then every pipe it can make, filled: the bytes they hold.'''
    request, reply = fcntl.fcntl(int(sys.argv[1]), 1032), fcntl.fcntl(int(sys.argv[2]), 1032)
    pinned, made = 0, []
    try:
        while True:
            r, w = os.pipe()
            made += [r, w]
            try:
                fcntl.fcntl(w, 1031, 1 << 20)
            except PermissionError:
                pass
            os.set_blocking(w, False)
            try:
                while True:
                    pinned += os.write(w, b"x" * 65536)
            except BlockingIOError:
                pass
    except OSError:  # out of descriptors
        pass
    for fd in made:
        os.close(fd)
    return [float(request), float(reply), float(pinned)]

def grow(completions, **kwargs):
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 1 << 20)

def splice(completions, **kwargs):
    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()
    page = ctypes.create_string_buffer(4096)
    iov = (ctypes.c_void_p * 2)(ctypes.cast(page, ctypes.c_void_p), 4096)
    if libc.syscall(278, w, iov, 1, 0) < 0:  # vmsplice
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return [0.0] * len(completions)
"""


def test_its_pipes_are_small_and_what_it_can_pin_in_pipes_is_about_2_mib():
    with Sandbox(SOURCE, "own_pipes", slot=3960, timeout_s=20.0) as sb:
        request, reply, pinned = sb.call(["a", "b", "c"]).rewards
    assert request == 256 << 10 and reply == 64 << 10
    assert 0 < pinned <= 2 << 20  # 64 descriptors: ~29 pipes at their 64 KiB default


@pytest.mark.parametrize("name", ["grow", "splice"])
def test_growing_a_pipe_or_vmsplicing_into_one_is_denied(name):
    with Sandbox(SOURCE, name, slot=3961, timeout_s=10.0) as sb:
        with pytest.raises(SandboxError) as refused:
            sb.call(["a"])
    assert refused.value.kind == "PermissionError" and sb.faults == 0
