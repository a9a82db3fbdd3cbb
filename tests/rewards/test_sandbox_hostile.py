"""The reward sandbox against hostile reward functions, and with ordinary ones copied from TRL's docs.

Every hostile case asserts two things: the attack was contained, and the next call on the same Sandbox returns the
right rewards (a fresh worker where the attack cost the old one). No database: the sandbox never imports Django.
Runs as root here, so workers get uids of their own; one test runs the host without capabilities (the non-root path).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from rewards.sandbox import Sandbox, SandboxCrash, SandboxError, SandboxTimeout, SandboxUnavailable, sandbox_support
from rewards.sandbox import host as sandbox_host
from rewards.sandbox.scratch import wipe

REPO = Path(__file__).resolve().parents[2]
SETTINGS = REPO / "grpo_web" / "settings.py"
SUPPORT = sandbox_support()
pytestmark = pytest.mark.skipif(not SUPPORT["ok"], reason=f"this kernel cannot sandbox: {SUPPORT['missing']}")

PROBE = ["ab", "abcd", ""]
PROBE_REWARDS = [2.0, 4.0, 0.0]


def hostile(attack: str, prelude: str = "") -> str:
    """A reward function that runs ``attack`` when the ``mode`` column says so and scores length otherwise."""
    return (
        f"import os, sys, time, signal, socket, ctypes\n{prelude}\n"
        "def f(completions, mode, **kwargs):\n"
        "    if mode[0] == 'attack':\n"
        f"{textwrap.indent(textwrap.dedent(attack), ' ' * 8)}\n"
        "    return [float(len(c)) for c in completions]\n"
    )


def attack(sb: Sandbox):
    return sb.call(PROBE, mode=["attack"] * len(PROBE))


def assert_next_call_works(sb: Sandbox) -> None:
    assert sb.call(PROBE, mode=["ok"] * len(PROBE)).rewards == PROBE_REWARDS


@pytest.fixture
def sandbox(started_sandboxes):
    def make(source: str, name: str = "f", **kwargs) -> Sandbox:
        kwargs.setdefault("timeout_s", 1.0)
        return started_sandboxes(source, name, **kwargs)

    return make


@pytest.fixture(scope="module")
def sentinel():
    """A process of the test's own, which no worker may kill."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


# --- ordinary reward functions --------------------------------------------------------------------------------------


def test_the_trl_docs_length_reward_runs_unchanged(sandbox):
    sb = sandbox(
        "def reward_len(completions, **kwargs):\n"
        "    return [-abs(20 - len(completion)) for completion in completions]\n",
        "reward_len",
    )
    assert sb.call(["x" * 20, "x" * 5, "x" * 30]).rewards == [0.0, -15.0, -10.0]
    assert sb.isolation["uid"] == sandbox_host.UID_BASE and sb.isolation["seccomp"] is True
    assert sb.isolation["landlock"] == "fs+net+scope" and sb.isolation["weak"] == []


def test_the_trl_docs_format_reward_reads_conversational_completions(sandbox):
    source = textwrap.dedent('''
        import re

        def format_reward_func(completions, **kwargs):
            """Reward function that checks if the completion has a specific format."""
            pattern = r"^<think>.*?</think><answer>.*?</answer>$"
            completion_contents = [completion[0]["content"] for completion in completions]
            matches = [re.match(pattern, content) for content in completion_contents]
            return [1.0 if match else 0.0 for match in matches]
    ''')
    sb = sandbox(source, "format_reward_func")
    completions = [
        [{"role": "assistant", "content": "<think>2+2</think><answer>4</answer>"}],
        [{"role": "assistant", "content": "4"}],
    ]
    assert sb.call(completions, prompts=[[{"role": "user", "content": "2+2?"}]] * 2).rewards == [1.0, 0.0]


def test_columns_prompts_and_completion_ids_arrive_as_keyword_arguments(sandbox):
    sb = sandbox(
        textwrap.dedent("""
        def f(completions, prompts, completion_ids, answer, level, **kwargs):
            assert sorted(kwargs) == ["log_extra", "log_metric", "trainer_state"], sorted(kwargs)
            return [float(c == a) + lv / 10 + len(ids) / 100 + len(p) / 1000
                    for c, a, lv, ids, p in zip(completions, answer, level, completion_ids, prompts)]
    """)
    )
    res = sb.call(["7", "8"], prompts=["q", "qq"], completion_ids=[[1, 2], [3]], answer=["7", "7"], level=[1, 2])
    assert res.rewards == pytest.approx([1.121, 0.212])


def test_trainer_state_is_an_object_with_trls_fields(sandbox):
    sb = sandbox(
        "def f(completions, trainer_state, **kw):\n"
        "    return [trainer_state.global_step / max(trainer_state.max_steps, 1) + trainer_state.epoch]"
        " * len(completions)\n"
    )

    class TrainerState:  # the fields TRL's TrainerState has
        global_step, max_steps, epoch, num_train_epochs = 5, 10, 2.0, 3

    assert sb.call(["a"], trainer_state=TrainerState()).rewards == [2.5]
    assert sb.call(["a"], trainer_state={"global_step": 1, "max_steps": 4, "epoch": 0.0}).rewards == [0.25]
    assert sb.call(["a"]).rewards == [0.0]


def test_log_extra_and_log_metric_come_back_and_replay_into_trl(sandbox):
    sb = sandbox(
        textwrap.dedent("""
        def f(completions, log_extra, log_metric, **kwargs):
            log_extra("golden", [c.upper() for c in completions])
            log_extra("golden", ["more"])
            log_metric("mean_len", sum(map(len, completions)) / len(completions))
            log_metric("mean_len", 1)
            return [1.0] * len(completions)
    """)
    )
    extra, metrics = {}, []
    res = sb.call(
        ["ab", "c"],
        log_extra=lambda col, vals: extra.setdefault(col, []).extend(vals),
        log_metric=lambda name, value: metrics.append((name, value)),
    )
    assert res.logged_extra == {"golden": ["AB", "C", "more"]}
    assert res.logged_metrics == {"mean_len": [1.5, 1.0]}
    assert extra == {"golden": ["AB", "C", "more"]} and metrics == [("mean_len", 1.5), ("mean_len", 1.0)]


def test_an_error_reports_the_users_line_kind_message_and_what_was_printed(sandbox):
    sb = sandbox(
        "def f(completions, **kw):\n"
        "    print('scoring', len(completions))\n"
        "    total = 0\n"
        "    return [1 / total for c in completions]\n"
    )
    with pytest.raises(SandboxError) as exc:
        sb.call(["a"])
    assert (exc.value.kind, exc.value.line, exc.value.message) == ("ZeroDivisionError", 4, "division by zero")
    assert exc.value.stdout == "scoring 1\n" and exc.value.duration_s > 0
    assert "return [1 / total" in exc.value.traceback and str(exc.value).startswith("ZeroDivisionError at line 4")
    assert sb.faults == 0 and sb.failures == 1 and sb.running


def test_printed_output_is_captured_with_each_call(sandbox):
    sb = sandbox(
        "import sys\ndef f(completions, **kw):\n    print('n =', len(completions))\n"
        "    print('warn', file=sys.stderr)\n    return [0.0] * len(completions)\n"
    )
    res = sb.call(["a", "b"])
    assert (res.stdout, res.stdout_truncated) == ("n = 2\nwarn\n", False)
    assert res.duration_s > 0


def test_a_syntax_error_is_reported_at_start_with_its_line(sandbox):
    with pytest.raises(SandboxError) as exc:
        sandbox("def f(completions, **kw):\n    return [1.0 for c in completions\n\n")
    assert exc.value.kind == "SyntaxError" and exc.value.line == 2


def test_an_import_error_at_start_is_reported_with_its_line(sandbox):
    with pytest.raises(SandboxError) as exc:
        sandbox("import os\nimport no_such_module_here\ndef f(completions, **kw):\n    return []\n")
    assert exc.value.kind == "ModuleNotFoundError" and exc.value.line == 2


def test_a_source_without_the_named_function_is_refused(sandbox):
    with pytest.raises(SandboxError) as exc:
        sandbox("def other(completions, **kw):\n    return []\n", "accuracy")
    assert exc.value.kind == "MissingFunction" and "accuracy" in exc.value.message


# rewards as TRL's docs build the ones that take settings: a function that returns the reward (a closure), or a class
FACTORY = """
import math


def get_length_reward(target):
    def length_reward(completions, **kwargs):
        return [-abs(len(c) - target) / target for c in completions]

    return length_reward
"""


def test_a_factory_s_source_says_how_to_make_the_reward_of_it(sandbox):
    with pytest.raises(SandboxError) as exc:
        sandbox(FACTORY, "length_reward")
    assert exc.value.kind == "MissingFunction"
    assert "it defines get_length_reward" in exc.value.message and "math" not in exc.value.message
    assert "end the source with `length_reward = get_length_reward(...)`" in exc.value.message
    # done as it says, the closure is the reward
    sb = sandbox(FACTORY + "\nlength_reward = get_length_reward(4)\n", "length_reward")
    assert sb.call(["abcd", "ab"]).rewards == [0.0, -0.5]


def test_a_class_named_as_the_reward_is_refused_with_what_to_write(sandbox):
    source = "class Judge:\n    def __call__(self, completions, **kwargs):\n        return [1.0 for _ in completions]\n"
    with pytest.raises(SandboxError) as exc:
        sandbox(source, "Judge")
    assert exc.value.kind == "MissingFunction" and "`judge = Judge(...)`" in exc.value.message
    assert sandbox(source + "judge = Judge()\n", "judge").call(["a"]).rewards == [1.0]


def test_bools_ints_none_and_numpy_scalars_become_floats_or_none(sandbox):
    sb = sandbox(
        "import numpy as np\ndef f(completions, **kw):\n"
        "    return [True, False, 3, None, np.float32(0.5), np.int64(2)]\n",
        timeout_s=10,
    )
    assert sb.call(list("abcdef")).rewards == [1.0, 0.0, 3.0, None, 0.5, 2.0]


def test_an_async_reward_function_is_awaited(sandbox):
    sb = sandbox("async def f(completions, **kw):\n    return [len(c) / 10 for c in completions]\n")
    assert sb.call(["abc"]).rewards == [0.3]


def test_an_async_reward_runs_on_an_event_loop_as_in_trl(sandbox):
    """TRL runs async rewards on an event loop (asyncio.sleep, gather and timeouts need one); the worker has no
    sockets, so its loop wakes through a pipe. A plain function's asyncio.run works too."""
    source = textwrap.dedent("""
        import asyncio

        async def one(c):
            await asyncio.sleep(0.01)
            return len(c) / 10

        async def f(completions, **kw):
            return await asyncio.wait_for(asyncio.gather(*(one(c) for c in completions)), timeout=5)

        def g(completions, **kw):
            return asyncio.run(f(completions))
    """)
    sb = sandbox(source, timeout_s=10)
    assert sb.call(["abc", "abcdef"]).rewards == [0.3, 0.6]
    assert sb.call(["a"]).rewards == [0.1]  # the loop lives on between calls
    assert sandbox(source, "g", timeout_s=10).call(["abcd"]).rewards == [0.4]


def test_math_verify_works_inside_the_sandbox_with_its_signal_timeouts(sandbox):
    sb = sandbox(
        textwrap.dedent(r"""
        from math_verify import parse, verify

        def f(completions, answer, **kwargs):
            return [1.0 if verify(parse(a), parse(c)) else 0.0 for c, a in zip(completions, answer)]
    """),
        timeout_s=30,
    )
    assert sb.call(["so \\boxed{\\frac{1}{2}}", "\\boxed{3}"], answer=["$0.5$", "$4$"]).rewards == [1.0, 0.0]


def test_one_worker_serves_every_call_until_it_is_lost(sandbox):
    source = hostile("os._exit(0)", prelude="CALLS = []")
    sb = sandbox(source.replace("    return [float(len(c))", "    CALLS.append(1)\n    return [float(len(CALLS))"))
    assert [sb.call(["a"], mode=["ok"]).rewards for _ in range(3)] == [[1.0], [2.0], [3.0]]
    with pytest.raises(SandboxCrash):
        sb.call(["a"], mode=["attack"])
    assert sb.call(["a"], mode=["ok"]).rewards == [1.0]  # a fresh worker
    assert (sb.calls, sb.failures, sb.faults) == (5, 1, 1)


def test_a_worker_killed_between_calls_is_replaced_and_counted(sandbox):
    sb = sandbox(hostile("pass"))
    os.kill(sb.pid, signal.SIGKILL)
    time.sleep(0.1)
    with pytest.raises(SandboxCrash) as exc:  # the call that finds it dead fails: a fault the caller can count
        assert_next_call_works(sb)
    assert exc.value.kind == "Crash" and exc.value.message.startswith(
        "between calls, the worker running f was killed by SIGKILL"
    )
    assert sb.faults == 1 and sb.failures == 1
    assert_next_call_works(sb)


WORKER_OF_A_HOST = """
import time
from rewards.sandbox import Sandbox
sb = Sandbox("def f(completions, **kw):\\n    return [0.0] * len(completions)\\n", "f", slot=5)
sb.start()
print(sb.pid, sb.scratch, flush=True)
time.sleep(60)
"""


def test_the_worker_dies_with_its_host():
    host = subprocess.Popen([sys.executable, "-c", WORKER_OF_A_HOST], cwd=REPO, stdout=subprocess.PIPE, text=True)
    pid, scratch = host.stdout.readline().split()
    worker = int(pid)
    assert Path(f"/proc/{worker}").exists()
    host.kill()
    host.wait()

    def gone():
        try:
            return "State:\tZ" in Path(f"/proc/{worker}/status").read_text()
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 5
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone()
    os.rmdir(scratch)  # the killed host could not remove it: an empty mount point


# --- processes, threads, exec -------------------------------------------------------------------------------------


def test_os_system_cannot_start_a_shell(sandbox, tmp_path):
    marker = tmp_path / "pwned"
    sb = sandbox(hostile(f"return [float(os.system('touch {marker}'))] * len(completions)"))
    assert attack(sb).rewards[0] != 0.0  # system() could not fork: 127 << 8
    assert not marker.exists()
    assert_next_call_works(sb)


def test_subprocess_and_exec_are_denied(sandbox):
    sb = sandbox(
        hostile("""
        import subprocess
        if kwargs.get('how') == ['exec']:
            os.execv('/bin/sh', ['sh', '-c', 'id'])
        subprocess.run(['/bin/sh', '-c', 'id'])
    """)
    )
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "PermissionError"
    with pytest.raises(SandboxError) as exc:
        sb.call(PROBE, mode=["attack"] * 3, how=["exec"] * 3)
    assert exc.value.kind == "PermissionError"
    assert_next_call_works(sb)


def test_a_fork_bomb_fails_at_the_first_fork(sandbox):
    sb = sandbox(hostile("while True:\n    os.fork()"))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "PermissionError" and exc.value.line is not None
    assert_next_call_works(sb)


def test_a_thread_bomb_cannot_start_a_thread(sandbox):
    sb = sandbox(
        hostile("""
        import threading
        for _ in range(10000):
            threading.Thread(target=time.sleep, args=(60,)).start()
    """)
    )
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert (exc.value.kind, exc.value.message) == ("RuntimeError", "can't start new thread")
    assert_next_call_works(sb)


# --- memory, CPU, time --------------------------------------------------------------------------------------------


def test_one_huge_allocation_fails_within_the_address_space_limit(sandbox):
    sb = sandbox(hostile("x = bytearray(8 << 30)"), memory_mb=512)
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "MemoryError"
    assert_next_call_works(sb)


def test_a_growing_memory_bomb_stops_at_the_limit(sandbox):
    sb = sandbox(
        hostile("""
        chunks = []
        while True:
            chunks.append(b'x' * (16 << 20))
    """),
        memory_mb=384,
        timeout_s=10,
    )
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "MemoryError"
    assert_next_call_works(sb)


def test_an_infinite_loop_is_killed_at_the_time_limit(sandbox):
    sb = sandbox(hostile("while True:\n    pass"), timeout_s=1.0)
    with pytest.raises(SandboxTimeout):
        attack(sb)
    assert sb.faults == 1 and not sb.running
    assert_next_call_works(sb)


def test_a_long_sleep_is_killed_at_the_time_limit(sandbox):
    sb = sandbox(hostile("time.sleep(3600)"), timeout_s=1.0)
    with pytest.raises(SandboxTimeout):
        attack(sb)
    assert_next_call_works(sb)


def test_spinning_with_sigxcpu_ignored_is_killed_by_the_cpu_limit(sandbox):
    sb = sandbox(
        hostile("""
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        while True:
            pass
    """),
        timeout_s=20,
        cpu_limit_s=1,
    )
    with pytest.raises(SandboxCrash) as exc:  # a crash at the hard CPU limit, not a SandboxTimeout at 20 s
        attack(sb)
    assert "SIGKILL" in exc.value.message
    assert_next_call_works(sb)


def test_a_timer_left_armed_cannot_run_code_between_calls(sandbox):
    sb = sandbox(
        hostile("""
        def spin(*_):
            while True:
                pass
        signal.signal(signal.SIGALRM, spin)
        signal.setitimer(signal.ITIMER_REAL, 0.3)
    """)
    )
    attack(sb)
    time.sleep(0.5)
    assert_next_call_works(sb)
    assert sb.faults == 0


# --- crashes and exits ----------------------------------------------------------------------------------------------


def test_a_segfault_through_ctypes_costs_only_the_worker(sandbox):
    sb = sandbox(hostile("ctypes.string_at(0)"))
    with pytest.raises(SandboxCrash) as exc:
        attack(sb)
    assert "SIGSEGV" in exc.value.message and sb.faults == 1
    assert_next_call_works(sb)


def test_sys_exit_is_an_ordinary_error(sandbox):
    sb = sandbox(hostile("sys.exit(3)"))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "SystemExit" and sb.faults == 0
    assert_next_call_works(sb)


def test_os_exit_costs_only_the_worker(sandbox):
    sb = sandbox(hostile("os._exit(7)"))
    with pytest.raises(SandboxCrash) as exc:
        attack(sb)
    assert "status 7" in exc.value.message
    assert_next_call_works(sb)


# --- signals to others ----------------------------------------------------------------------------------------------


def test_it_cannot_kill_its_parent(sandbox, sentinel):
    sb = sandbox(hostile("os.kill(os.getppid(), signal.SIGKILL)"))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "PermissionError"
    assert sentinel.poll() is None
    assert_next_call_works(sb)


def test_kill_minus_one_reaches_no_other_process(sandbox, sentinel):
    sb = sandbox(hostile("os.kill(-1, signal.SIGKILL)"), slot=7)
    assert attack(sb).rewards == PROBE_REWARDS  # kill(-1) spares the caller and reports success even when every
    time.sleep(0.2)  # target refused, so the evidence is who is still alive
    assert sentinel.poll() is None and sb.running
    assert_next_call_works(sb)


def test_kill_of_its_own_process_group_kills_only_itself(sandbox, sentinel):
    sb = sandbox(hostile("os.kill(0, signal.SIGKILL)"))
    with pytest.raises(SandboxCrash):
        attack(sb)
    assert sentinel.poll() is None
    assert_next_call_works(sb)


def test_ptrace_prlimit_and_pdeathsig_tricks_are_denied(sandbox):
    sb = sandbox(
        hostile("""
        libc = ctypes.CDLL(None, use_errno=True)
        results = []
        for call in (lambda: libc.ptrace(16, os.getppid(), 0, 0),                  # PTRACE_ATTACH
                     lambda: libc.prctl(1, 0, 0, 0, 0),                            # PR_SET_PDEATHSIG off
                     lambda: libc.prlimit(os.getppid(), 7, None, None),             # RLIMIT_NOFILE of the host
                     lambda: libc.setuid(0)):
            ctypes.set_errno(0)
            results.append(float(call() == -1 and ctypes.get_errno() == 1))          # -1, EPERM
        return results[:len(completions)] + [0.0] * (len(completions) - len(results))
    """)
    )
    assert sb.call(["a", "b", "c", "d"], mode=["attack"] * 4).rewards == [1.0, 1.0, 1.0, 1.0]
    assert_next_call_works(sb)


@pytest.mark.parametrize(
    "name, nr, errno_",
    [
        ("unshare", 272, 1),
        ("setns", 308, 1),
        ("mount", 165, 1),
        ("bpf", 321, 1),
        ("io_uring_setup", 425, 1),
        ("keyctl", 250, 1),
        ("perf_event_open", 298, 1),
        ("userfaultfd", 323, 1),
        ("memfd_create", 319, 1),
        ("personality", 135, 1),
        ("process_vm_readv", 310, 1),
        ("shmget", 29, 1),
        ("clone3", 435, 38),
    ],
)
def test_dangerous_syscalls_fail_with_the_expected_errno(sandbox, name, nr, errno_):
    sb = sandbox(syscall_probe(nr))
    assert attack(sb).rewards == [-1.0, float(errno_), 0.0], name
    assert_next_call_works(sb)


def syscall_probe(nr: int) -> str:
    """A reward function that, attacked, makes system call ``nr`` and returns [its result, errno, 0.0]."""
    return hostile(f"""
        libc = ctypes.CDLL(None, use_errno=True)
        ctypes.set_errno(0)
        ret = libc.syscall({nr}, 0, 0, 0, 0, 0)
        return [float(ret), float(ctypes.get_errno()), 0.0]
    """)


def test_x32_system_calls_kill_the_worker(sandbox):
    sb = sandbox(hostile("ctypes.CDLL(None).syscall(0x40000000 | 39)"))  # x32 getpid: a way around the filter
    with pytest.raises(SandboxCrash) as exc:
        attack(sb)
    assert "SIGSYS" in exc.value.message
    assert_next_call_works(sb)


# --- network --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("port", [5432, 6379])
def test_tcp_to_local_services_is_denied(sandbox, port):
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass  # the service is up: the sandbox is what stops the worker
    sb = sandbox(hostile(f"socket.create_connection(('127.0.0.1', {port}), timeout=1)"))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "PermissionError"
    assert_next_call_works(sb)


@pytest.mark.parametrize("port", [5432, 6379])
def test_udp_to_local_services_is_denied(sandbox, port):
    sb = sandbox(hostile(f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))"))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "PermissionError"
    assert_next_call_works(sb)


def test_unix_sockets_filesystem_and_abstract_are_denied(sandbox):
    pg = "/var/run/postgresql/.s.PGSQL.5432"
    assert os.path.exists(pg)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"\0grpo-sandbox-test-{os.getpid()}")
    listener.listen(1)
    try:
        sb = sandbox(
            hostile("""
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(kwargs['target'][0])
        """)
        )
        for target in (pg, f"\0grpo-sandbox-test-{os.getpid()}"):
            with pytest.raises(SandboxError) as exc:
                sb.call(PROBE, mode=["attack"] * 3, target=[target] * 3)
            assert exc.value.kind == "PermissionError"
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing connected
        assert_next_call_works(sb)
    finally:
        listener.close()


# --- secrets and files ----------------------------------------------------------------------------------------------


def test_the_environment_holds_no_secret(sandbox, monkeypatch):
    monkeypatch.setenv("GRPO_TEST_SECRET", "hunter2")
    sb = sandbox(hostile("print(*sorted(os.environ))\nreturn [float('hunter2' in repr(os.environ))] * 3"))
    res = attack(sb)
    assert res.rewards == [0.0, 0.0, 0.0]
    assert set(res.stdout.split()) <= {
        "PATH",
        "LANG",
        "LC_ALL",
        "HOME",
        "TMPDIR",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
    }
    assert_next_call_works(sb)


def test_the_parents_environ_in_proc_is_unreadable(sandbox):
    sb = sandbox(hostile("open(f'/proc/{os.getppid()}/environ', 'rb').read()"))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind in ("FileNotFoundError", "PermissionError")
    assert_next_call_works(sb)


@pytest.fixture
def world_readable_secret():
    """A 'database' any user could read by file permissions: only the sandbox keeps the worker out."""
    folder = Path(tempfile.mkdtemp(prefix="grpo-secret-"))
    folder.chmod(0o755)
    path = folder / "grpo.sqlite3"
    path.write_text("SECRET")
    path.chmod(0o644)
    yield path
    path.unlink()
    folder.rmdir()


@pytest.mark.parametrize("target", ["settings", "database", "/etc/passwd"])
def test_host_files_are_unreadable(sandbox, world_readable_secret, target):
    path = {"settings": str(SETTINGS), "database": str(world_readable_secret)}.get(target, target)
    sb = sandbox(hostile(f"open({path!r}).read()"))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind in ("FileNotFoundError", "PermissionError")
    assert_next_call_works(sb)


def test_writing_outside_scratch_is_denied(sandbox, tmp_path):
    target = f"/tmp/grpo-sandbox-escape-{os.getpid()}"
    sb = sandbox(hostile(f"open({target!r}, 'w').write('x')"))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind in ("FileNotFoundError", "PermissionError", "OSError")
    assert not os.path.exists(target)
    assert_next_call_works(sb)


def test_a_symlink_or_hard_link_from_scratch_does_not_reach_host_files(sandbox, world_readable_secret):
    sb = sandbox(
        hostile(f"""
        if kwargs.get('how', [''])[0] == 'hard':
            os.link({str(world_readable_secret)!r}, 'hard')
            return [float(open('hard').read() == 'SECRET')] * len(completions)
        os.symlink({str(world_readable_secret)!r}, 'link')
        return [float(open('link').read() == 'SECRET')] * len(completions)
    """)
    )
    for how in ("soft", "hard"):
        with pytest.raises(SandboxError) as exc:
            sb.call(PROBE, mode=["attack"] * 3, how=[how] * 3)
        assert exc.value.kind in ("FileNotFoundError", "PermissionError")
    assert_next_call_works(sb)


def test_filling_the_disk_stops_at_the_scratch_limit_and_leaves_nothing_behind(sandbox):
    sb = sandbox(
        hostile("""
        written, n = 0, 0
        try:
            while True:
                with open(f'fill{n}', 'wb') as fh:
                    for _ in range(8):
                        fh.write(b'x' * (1 << 20))
                        written += 1 << 20
                n += 1
        except OSError as exc:
            print(type(exc).__name__, exc.errno)
        return [float(written)] * len(completions)
    """),
        scratch_mb=16,
        timeout_s=10,
    )
    scratch = sb.scratch
    res = attack(sb)
    assert 0 < res.rewards[0] <= 16 << 20 and res.stdout.startswith("OSError 28")  # ENOSPC
    assert_next_call_works(sb)
    assert os.listdir(scratch) == []  # the tmpfs lives in the worker's mount namespace only
    sb.close()
    assert not os.path.exists(scratch)


# --- output and results -------------------------------------------------------------------------------------------


def test_100_mb_of_print_is_capped(sandbox):
    sb = sandbox(hostile("for _ in range(100):\n    print('x' * (1 << 20))"), timeout_s=10)
    res = attack(sb)
    assert res.stdout_truncated and len(res.stdout) == 64 * 1024
    assert_next_call_works(sb)


def test_100_mb_written_to_fd_1_goes_nowhere(sandbox):
    sb = sandbox(
        hostile("for _ in range(100):\n    os.write(1, b'x' * (1 << 20))\n    os.write(2, b'y' * 1024)"), timeout_s=10
    )
    res = attack(sb)
    assert res.stdout == "" and res.rewards == PROBE_REWARDS
    assert_next_call_works(sb)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("[float('nan')] * len(completions)", "rewards[0] is nan"),
        ("[1.0, float('inf'), 0.0]", "rewards[1] is inf"),
        ("['1.0'] * len(completions)", "rewards[0] is a str"),
        ("[1.0]", "returned 1 values for 3 completions"),
        ("{'a': 1}", "returned a dict"),
        ("(x for x in completions)", "returned a generator"),
        ("[[1.0]] * 3", "rewards[0] is a list"),
        ("[2 ** 2000] * 3", "rewards[0] (int) is not a number"),
        ("[0.0] * (13 * 1000 * 1000)", "returned 13000000 values for 3 completions"),  # ~100 MB
        ("['x' * (100 << 20), 0.0, 0.0]", "rewards[0] is a str"),
    ],
)
def test_malformed_results_are_clear_errors(sandbox, value, expected):
    sb = sandbox(hostile(f"return {value}"), timeout_s=10)
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "InvalidResult" and expected in exc.value.message
    assert sb.faults == 0
    assert_next_call_works(sb)


def test_a_forged_oversized_reply_costs_only_the_worker(sandbox):
    sb = sandbox(hostile("os.write(int(sys.argv[2]), (1 << 31).to_bytes(4, 'big'))"))
    with pytest.raises(SandboxCrash) as exc:
        attack(sb)
    assert exc.value.kind == "ProtocolError" and "limit" in exc.value.message and sb.faults == 1
    assert_next_call_works(sb)


def test_a_garbage_reply_costs_only_the_worker(sandbox):
    sb = sandbox(hostile("body = b'\\xc1' * 100\nos.write(int(sys.argv[2]), len(body).to_bytes(4, 'big') + body)"))
    with pytest.raises(SandboxCrash) as exc:
        attack(sb)
    assert exc.value.kind == "ProtocolError"
    assert_next_call_works(sb)


def test_a_decompression_bomb_reply_is_refused(sandbox):
    # 40 MB of empty msgpack arrays would decode into 40 million Python lists in the host.
    sb = sandbox(
        hostile("""
        import struct
        n = 40 << 20
        body = b'\\xdd' + struct.pack('>I', n) + b'\\x90' * n
        os.write(int(sys.argv[2]), len(body).to_bytes(4, 'big') + body)
    """),
        timeout_s=10,
    )
    with pytest.raises(SandboxCrash) as exc:
        attack(sb)
    assert exc.value.kind == "ProtocolError"
    assert_next_call_works(sb)


def test_an_oversized_reply_is_refused_by_the_worker(sandbox):
    sb = sandbox(
        hostile("log_extra = kwargs['log_extra']\nlog_extra('blob', ['y' * 1000] * 2000)"),  # 2 MB
        max_message_mb=1,
    )
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "ResultTooLarge" and sb.faults == 0
    assert_next_call_works(sb)


def test_100_mb_of_log_extra_is_refused_by_the_worker_as_too_much_logging(sandbox):
    sb = sandbox(hostile("log_extra = kwargs['log_extra']\nlog_extra('blob', ['y' * 1000] * 100_000)"))  # 100 MB
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "LogTooLarge" and sb.faults == 0
    assert_next_call_works(sb)


def test_a_module_that_never_finishes_loading_times_out_at_start(sandbox):
    with pytest.raises(SandboxTimeout):
        sandbox("while True:\n    pass\ndef f(completions, **kw):\n    return []\n", startup_timeout_s=1)


def test_a_10_mb_source_is_refused():
    with pytest.raises(SandboxError) as exc:
        Sandbox("x = 1\n" * ((10 << 20) // 6), "f")
    assert exc.value.kind == "SourceTooLarge" and "limit" in exc.value.message


# --- failing closed -------------------------------------------------------------------------------------------------


def test_it_refuses_to_run_without_landlock_unless_weak_mode_is_allowed(monkeypatch, sandbox):
    monkeypatch.setattr(sandbox_host._child, "landlock_abi", lambda: 0)  # a kernel without Landlock
    with pytest.raises(SandboxUnavailable) as exc:
        sandbox("def f(completions, **kw):\n    return [0.0] * len(completions)\n")
    assert "Landlock is not available" in exc.value.message and "GRPO_SANDBOX_ALLOW_WEAK" in exc.value.message
    monkeypatch.setenv("GRPO_SANDBOX_ALLOW_WEAK", "1")
    assert sandbox("def f(completions, **kw):\n    return [0.0] * len(completions)\n").call(["a"]).rewards == [0.0]
    monkeypatch.setenv("GRPO_SANDBOX_ALLOW_WEAK", "maybe")
    with pytest.raises(ValueError, match="GRPO_SANDBOX_ALLOW_WEAK"):
        Sandbox("", "f")


NON_ROOT_HOST = r'''
import json, os, subprocess, sys
from rewards.sandbox import Sandbox, SandboxError, sandbox_support
source = """
import os, signal
def f(completions, mode, **kwargs):
    m = mode[0]
    if m == "parent":
        os.kill(os.getppid(), 0)
    if m == "sentinel":
        os.kill(kwargs["pid"][0], 0)
    if m == "read":
        open(SETTINGS_PATH).read()
    if m == "fill":
        for i in range(4):
            open(f"f{i}", "wb").write(b"x" * (3 << 20))
    return [float(len(c)) for c in completions]
"""
out = {"support": sandbox_support()}
sentinel = subprocess.Popen(["sleep", "60"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # same uid
try:
    Sandbox(source, "f", slot=3, private_mounts=False).start()
except SandboxError as exc:
    out["no_private_root"] = exc.kind
for private in (None, False):
    sb = Sandbox(source, "f", slot=3, timeout_s=5, scratch_mb=8, private_mounts=private, allow_weak=private is False)
    sb.start()
    res = {"isolation": sb.isolation}
    for mode in ("parent", "sentinel", "read", "fill", "ok"):
        try:
            res[mode] = sb.call(["ab"], mode=[mode], pid=[sentinel.pid]).rewards
        except SandboxError as exc:
            res[mode] = exc.kind
    res["left"] = os.listdir(sb.scratch)
    sb.close()
    out[str(private)] = res
out["sentinel_alive"] = sentinel.poll() is None
sentinel.kill()
print(json.dumps(out))
'''


def test_without_root_landlock_scoping_keeps_the_worker_from_its_host():
    """The host as uid 0 without CAP_SETUID: it cannot give workers a uid of their own, so they share its uid, and
    only Landlock's signal scoping (ABI >= 6) keeps them from signalling it. CAP_SETFCAP is kept so uid 0 may map
    itself into the user namespace that makes the private root (an ordinary uid needs nothing)."""
    if SUPPORT["landlock_abi"] < 6:
        pytest.skip(f"Landlock ABI {SUPPORT['landlock_abi']} has no scoping")
    script = NON_ROOT_HOST.replace("SETTINGS_PATH", repr(str(SETTINGS)))
    proc = subprocess.run(
        ["setpriv", "--bounding-set", "-all,+setfcap", "--inh-caps", "-all", "--", sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["support"]["can_setuid"] is False and out["sentinel_alive"]
    assert out["no_private_root"] == "SandboxUnavailable"  # the host's file system in view: weak mode only
    for private, mounts in (("None", True), ("False", False)):
        res = out[private]
        assert res["isolation"]["uid"] == 0 and res["isolation"]["private_mounts"] is mounts
        assert res["isolation"]["landlock"] == "fs+net+scope" and res["isolation"]["seccomp"] is True
        assert res["parent"] == "PermissionError"  # same uid: only the Landlock scope stops kill(ppid, 0)
        assert res["sentinel"] == "PermissionError"
        assert res["read"] in ("PermissionError", "FileNotFoundError")
        assert res["ok"] == [2.0] and res["left"] == []
    assert out["None"]["fill"] == "OSError"  # tmpfs of 8 MiB: ENOSPC inside the call
    assert out["False"]["fill"] == "ScratchQuota"  # a host directory: checked and emptied after the call


# --- a host that trusts nothing, in the private-root mode and in the fallback mode ---------------------------------

MODES = {"private": {}, "fallback": {"private_mounts": False, "allow_weak": True}}


def on_the_hosts_uid(monkeypatch) -> None:
    """Start workers as a host that cannot switch uids does: on its own uid (here 0, without capabilities)."""
    if SUPPORT["landlock_abi"] < 6:
        pytest.skip("a worker on the host's uid needs Landlock ABI 6 scoping")
    real = sandbox_host.sandbox_support
    monkeypatch.setattr(sandbox_host, "sandbox_support", lambda: {**real(), "can_setuid": False})


@pytest.fixture(params=sorted(MODES))
def isolated(request, sandbox, monkeypatch):
    """The ``sandbox`` factory in both modes: a private mount root, and the fallback (weak mode, forced): the host's
    file system in view, the scratch a host directory, and the worker on the host's own uid, as a host that cannot
    switch uids gives it (the Dockerfile's ``USER app``): the case where only seccomp and Landlock stand between
    user code and the app's files."""
    if request.param == "fallback":
        on_the_hosts_uid(monkeypatch)

    def make(source: str, name: str = "f", **kwargs) -> Sandbox:
        sb = sandbox(source, name, **{**MODES[request.param], **kwargs})
        assert sb.isolation["private_mounts"] is (request.param == "private")
        return sb

    make.mode = request.param
    return make


# User code that writes reply frames of its own to the reply pipe, as if it were the worker's protocol code.
FORGE = r"""
import msgpack

def send(obj=None, raw=None):
    body = raw if raw is not None else msgpack.packb(obj, use_bin_type=True)
    os.write(int(sys.argv[2]), len(body).to_bytes(4, 'big') + body)

def good(**fields):
    req = sys._getframe(2).f_locals['req']  # the worker's own request: its id
    return {"id": req["id"], "ok": True, "stdout": "", "truncated": False, "rewards": [1.0, 1.0, 1.0],
            "extra": [], "metrics": [], **fields}
"""


def forged(code: str) -> str:
    """A reward function that, attacked, forges a reply with ``code`` and then waits to be frozen."""
    return hostile(textwrap.dedent(code) + "\ntime.sleep(30)", prelude=FORGE)


def assert_protocol_error(sb: Sandbox, faults: int = 1) -> None:
    with pytest.raises(SandboxCrash) as exc:
        attack(sb)
    assert exc.value.kind == "ProtocolError" and sb.faults == faults and not sb.running
    assert_next_call_works(sb)


def test_a_reward_nested_1000_deep_is_a_protocol_error_not_a_recursion_error(isolated):
    sb = isolated(
        forged("""
        head = msgpack.packb(good(rewards=None))
        send(raw=head[:-1] + b'\\x93' + b'\\x91' * 1000 + b'\\xc0' + b'\\x00\\x00')  # rewards: [[[...]]], 0, 0]
    """)
    )
    assert_protocol_error(sb)


def test_an_error_message_nested_1000_deep_is_a_protocol_error(isolated):
    sb = isolated(
        forged("""
        head = msgpack.packb({'id': good()['id'], 'ok': False, 'stdout': '', 'truncated': False,
                              'error': {'kind': 'E', 'line': None, 'traceback': '', 'message': None}})
        send(raw=head[:-1] + b'\\x91' * 1000 + b'\\xc0')
    """)
    )
    assert_protocol_error(sb)


def test_a_reply_nested_beyond_the_decoders_depth_is_a_protocol_error(isolated):
    sb = isolated(forged("send(raw=b'\\x91' * 100_000 + b'\\xc0')"))
    assert_protocol_error(sb)


def test_a_truncated_frame_then_exit_is_a_crash(isolated):
    sb = isolated(hostile("os.write(int(sys.argv[2]), b'\\x00\\x00\\x10\\x00\\x81')\nos._exit(0)"))
    with pytest.raises(SandboxCrash) as exc:
        attack(sb)
    assert exc.value.kind == "Crash" and sb.faults == 1
    assert_next_call_works(sb)


def test_a_forged_cpu_time_is_a_protocol_error(isolated):
    sb = isolated(forged("send(good(cpu=0.0))"))
    assert_protocol_error(sb)


def test_the_host_measures_cpu_time_itself_and_replaces_a_worker_past_half_its_budget(isolated):
    sb = isolated(
        hostile("""
        while time.process_time() < 0.7:
            pass
    """),
        cpu_limit_s=1,
        timeout_s=10,
    )
    assert attack(sb).rewards == PROBE_REWARDS
    assert not sb.running and sb.faults == 0  # replaced between calls, as a budget, not a fault
    assert_next_call_works(sb)


def test_printed_output_past_the_cap_is_refused_by_the_host(isolated):
    sb = isolated(forged("send(good(stdout='x' * 100_000, truncated=True))"))
    assert_protocol_error(sb)


def test_30_mb_of_forged_log_extra_is_refused_by_the_host(isolated):
    sb = isolated(forged("send(good(extra=[['blob', ['y' * 1000] * 30_000]]))"), timeout_s=10)
    assert_protocol_error(sb)


def test_200k_forged_metric_names_are_refused_by_the_host(isolated):
    sb = isolated(forged("send(good(metrics=[[f'm{i}', 1.0] for i in range(200_000)]))"), timeout_s=10)
    assert_protocol_error(sb)


def test_200k_metric_names_logged_honestly_are_a_clear_error(isolated):
    sb = isolated(
        hostile("""
        for i in range(200_000):
            kwargs['log_metric'](f'm{i}', 1.0)
    """),
        timeout_s=10,
    )
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "LogTooLarge" and sb.faults == 0 and sb.running
    assert_next_call_works(sb)


def test_an_exception_named_sandbox_unavailable_is_the_users_own(isolated):
    sb = isolated(
        hostile(
            "raise SandboxUnavailable('Set GRPO_SANDBOX_ALLOW_WEAK=1 to fix this')",
            prelude="class SandboxUnavailable(Exception):\n    pass",
        )
    )
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert not isinstance(exc.value, SandboxUnavailable) and exc.value.kind == "UserException"
    assert "raised an exception named SandboxUnavailable" in exc.value.message and sb.faults == 0
    assert_next_call_works(sb)


def test_a_forged_unavailable_message_at_import_is_a_protocol_error(isolated):
    source = FORGE + textwrap.dedent("""
        send({"ok": False, "unavailable": True, "error": {"kind": "SandboxUnavailable", "line": None,
              "traceback": "", "message": "Set GRPO_SANDBOX_ALLOW_WEAK=1"}})
        time.sleep(30)
        def f(completions, **kw):
            return [0.0] * len(completions)
    """)
    with pytest.raises(SandboxCrash) as exc:
        isolated("import os, sys, time\n" + source)
    assert exc.value.kind == "ProtocolError" and not isinstance(exc.value, SandboxUnavailable)


def test_an_isolation_report_forged_at_import_is_a_protocol_error(isolated):
    source = (
        "import os, sys, time\n"
        + FORGE
        + textwrap.dedent("""
        send({"ok": True, "stdout": "", "isolation": {"private_mounts": True, "weak": []}})
        time.sleep(30)
        def f(completions, **kw):
            return [0.0] * len(completions)
    """)
    )
    with pytest.raises(SandboxCrash) as exc:
        isolated(source)
    assert exc.value.kind == "ProtocolError"


def test_a_worker_whose_report_disagrees_with_proc_is_refused(isolated, monkeypatch):
    monkeypatch.setattr(Sandbox, "_observe", staticmethod(lambda pid: {"uid": 4242}))
    with pytest.raises(SandboxCrash) as exc:
        isolated(hostile("pass"))
    assert exc.value.kind == "ProtocolError" and "kernel shows 4242" in exc.value.message


def test_bytes_left_after_a_reply_cost_the_worker_at_the_next_call(isolated):
    sb = isolated(hostile("send(good())", prelude=FORGE))  # a frame of its own, then the worker's real reply
    attack(sb)
    assert sb.faults == 0
    # The real reply is either waiting already (the worker is replaced before the next call) or comes when the
    # worker is thawed for it (a reply out of turn): one fault either way, and the call after that works.
    try:
        outcome = sb.call(PROBE, mode=["ok"] * 3).rewards
    except SandboxCrash as exc:
        outcome = exc.kind
    assert outcome in (PROBE_REWARDS, "ProtocolError") and sb.faults == 1
    assert_next_call_works(sb)


def test_the_scratch_quota_holds_in_both_modes(isolated):
    sb = isolated(
        hostile("""
        for i in range(6):
            with open(f'f{i}', 'wb') as fh:
                fh.write(b'x' * (1 << 20))
    """),
        scratch_mb=4,
    )
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    # a private tmpfs fills up inside the call; a host directory is measured and emptied after it
    assert exc.value.kind == {"private": "OSError", "fallback": "ScratchQuota"}[isolated.mode]
    assert_next_call_works(sb)
    assert os.listdir(sb.scratch) == []


def test_the_worker_is_stopped_between_calls(isolated):
    sb = isolated(hostile("pass"))
    assert_next_call_works(sb)

    def state():
        return next(
            line for line in Path(f"/proc/{sb.pid}/status").read_text().splitlines() if line.startswith("State:")
        ).split()[1]

    deadline = time.monotonic() + 5  # SIGSTOP is delivered asynchronously
    while state() != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert state() == "T"  # stopped until the next call
    assert_next_call_works(sb)


POSIX_TIMER = r"""
import ctypes, signal
TICKS = []
signal.signal(signal.SIGUSR1, lambda *_: TICKS.append(1))

def arm():
    libc = ctypes.CDLL(None, use_errno=True)
    event = ctypes.create_string_buffer(64)  # struct sigevent: sigev_value, then sigev_signo, sigev_notify=SIGEV_SIGNAL
    ctypes.c_int.from_buffer(event, 8).value = signal.SIGUSR1
    timer = ctypes.c_void_p()
    assert libc.timer_create(1, event, ctypes.byref(timer)) == 0  # CLOCK_MONOTONIC
    spec = (ctypes.c_long * 4)(0, 2_000_000, 0, 2_000_000)  # every 2 ms
    assert libc.timer_settime(timer, 0, spec, None) == 0
    return timer
"""


def test_a_posix_timer_runs_no_code_between_calls(isolated):
    sb = isolated(
        hostile(
            """
        if kwargs.get('how') == ['arm']:
            TIMER = arm()
        return [float(len(TICKS))] * len(completions)
    """,
            prelude=POSIX_TIMER,
        )
    )
    before = sb.call(PROBE, mode=["attack"] * 3, how=["arm"] * 3).rewards[0]
    time.sleep(0.5)  # 250 ticks, were the worker running
    after = sb.call(PROBE, mode=["attack"] * 3, how=["read"] * 3).rewards[0]
    assert after - before <= 3  # one pending signal delivered on SIGCONT, and what the call itself lasted
    assert sb.faults == 0


def cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# A POSIX timer whose signal the function picks: SIGCONT undoes the host's SIGSTOP, SIGKILL ends a frozen worker.
SIGNAL_TIMER = r"""
import ctypes, signal

def arm(sig, first_ms, every_ms=0):
    libc = ctypes.CDLL(None, use_errno=True)
    event = ctypes.create_string_buffer(64)  # struct sigevent: sigev_value, then sigev_signo, sigev_notify=SIGEV_SIGNAL
    ctypes.c_int.from_buffer(event, 8).value = sig
    timer = ctypes.c_void_p()
    assert libc.timer_create(1, event, ctypes.byref(timer)) == 0  # CLOCK_MONOTONIC
    spec = (ctypes.c_long * 4)(0, every_ms * 1_000_000, 0, first_ms * 1_000_000)
    assert libc.timer_settime(timer, 0, spec, None) == 0
    return timer

def burn(seconds):
    began = time.process_time()
    while time.process_time() - began < seconds:
        pass
"""


@pytest.mark.parametrize(
    "handler",
    [
        "signal.signal(signal.SIGCONT, lambda *_: burn(0.3))",  # continued, burns, and is left running
        "signal.signal(signal.SIGCONT, lambda *_: (burn(0.3), os.kill(os.getpid(), signal.SIGSTOP)))",  # stops again
    ],
    ids=["left-running", "stopped-again"],
)
def test_a_sigcont_timer_gets_no_cpu_between_calls_uncharged(isolated, handler):
    sb = isolated(
        hostile(f"{handler}\nTIMERS.append(arm(signal.SIGCONT, 200))", prelude=SIGNAL_TIMER + "TIMERS = []"),
        timeout_s=5,
    )
    assert attack(sb).rewards == PROBE_REWARDS and sb.faults == 0
    before = cpu_of(sb.pid)  # frozen: the timer's SIGCONT comes 0.2 s after the call
    deadline = time.monotonic() + 20  # wait until its handler has burnt, between calls
    while cpu_of(sb.pid) - before < 0.3 and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(SandboxCrash) as exc:  # the worker ran while frozen: killed, and a fault
        assert_next_call_works(sb)
    assert "ran between calls, when it was frozen" in exc.value.message and exc.value.kind == "Crash"
    assert sb.faults == 1 and sb.failures == 1
    assert_next_call_works(sb)


@pytest.mark.parametrize(
    "how",
    [
        "os.kill(os.getpid(), signal.SIGCONT)",  # kill
        "signal.raise_signal(signal.SIGCONT)",  # tgkill
        "signal.pthread_kill(__import__('threading').get_ident(), signal.SIGCONT)",  # tgkill
        "if ctypes.CDLL(None, use_errno=True).sigqueue(os.getpid(), signal.SIGCONT, 0) != 0:\n"
        "    raise PermissionError(ctypes.get_errno(), 'sigqueue')",  # rt_sigqueueinfo
        "__import__('fcntl').fcntl(int(sys.argv[1]), 10, signal.SIGCONT)",  # fcntl F_SETSIG
    ],
    ids=["kill", "raise", "pthread_kill", "sigqueue", "F_SETSIG"],
)
def test_sigcont_cannot_be_sent_or_chosen_by_user_code(isolated, how):
    sb = isolated(hostile(how))
    with pytest.raises(SandboxError) as exc:
        attack(sb)
    assert exc.value.kind == "PermissionError" and sb.faults == 0
    assert_next_call_works(sb)


def test_a_function_that_dies_between_calls_spends_its_fault_budget():
    from types import SimpleNamespace

    from workers.training.rewarding import SandboxedReward

    source = hostile("TIMERS.append(arm(signal.SIGKILL, 20))", prelude=SIGNAL_TIMER + "TIMERS = []")
    spec = SimpleNamespace(name="dies", source=source, entrypoint="f")
    reward = SandboxedReward(spec, slot=0, events=None, max_faults=3, allow_weak=False)
    try:
        outcomes = []
        for _ in range(8):
            outcomes.append(reward(PROBE, mode=["attack"] * 3))
            time.sleep(0.2)  # its timer kills the frozen worker
        assert reward.budget.disabled and reward.budget.faults == 3
        assert outcomes[-1] == [None] * 3 and outcomes.count(PROBE_REWARDS) == 3  # every other call, then none
    finally:
        reward.close()


@pytest.mark.parametrize(
    "call", ["libc.syscall(162)", "libc.syncfs(os.open('.', os.O_RDONLY))"], ids=["sync", "syncfs"]
)
def test_sync_and_syncfs_are_refused(isolated, call):
    sb = isolated(
        "import ctypes, os\n"
        "def f(completions, **kwargs):\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        f"    rc = {call}\n"
        "    return [float(rc), float(ctypes.get_errno())] + [0.0] * (len(completions) - 2)\n"
    )
    assert sb.call(PROBE).rewards == [-1.0, 1.0, 0.0]  # -1, EPERM: no host-wide writeback


@pytest.mark.parametrize(
    "name, nr",
    [
        ("chmod", 90),
        ("fchmod", 91),
        ("fchmodat", 268),
        ("fchmodat2", 452),
        ("chown", 92),
        ("fchownat", 260),
        ("utimensat", 280),
        ("setxattr", 188),
        ("getxattr", 191),
        ("fsetxattr", 190),
        ("removexattr", 197),
        ("inotify_init1", 294),
        ("inotify_add_watch", 254),
        ("fanotify_init", 300),
        ("statmount", 457),
        ("listmount", 458),
        ("io_setup", 206),
        ("io_submit", 209),
    ],
)
def test_file_metadata_watch_mount_table_and_aio_calls_are_denied(isolated, name, nr):
    sb = isolated(syscall_probe(nr))
    assert attack(sb).rewards == [-1.0, 1.0, 0.0], name  # -1, EPERM
    assert_next_call_works(sb)


def test_an_app_file_cannot_be_chmodded_stamped_or_tagged(isolated, world_readable_secret):
    before = os.stat(world_readable_secret)
    sb = isolated(
        hostile(f"""
        path = {str(world_readable_secret)!r}
        denied = []
        for change in (lambda: os.chmod(path, 0), lambda: os.utime(path, (0, 0)),
                       lambda: os.setxattr(path, 'user.x', b'1'), lambda: os.chown(path, 0, 0)):
            try:
                change()
            except PermissionError:
                denied.append(1)
        return [float(len(denied)), 0.0, 0.0]
    """)
    )
    assert attack(sb).rewards == [4.0, 0.0, 0.0]
    after = os.stat(world_readable_secret)
    assert (after.st_mode, after.st_mtime_ns, after.st_uid) == (before.st_mode, before.st_mtime_ns, before.st_uid)
    assert_next_call_works(sb)


def test_a_1500_deep_directory_nest_is_cleaned_at_restart_and_close(isolated):
    sb = isolated(
        hostile("""
        for _ in range(1500):
            os.mkdir('d')
            os.chdir('d')
        os._exit(0)
    """),
        timeout_s=10,
    )
    scratch = sb.scratch
    with pytest.raises(SandboxCrash):
        attack(sb)
    assert_next_call_works(sb)  # the restart emptied the scratch
    assert os.listdir(scratch) == []
    sb.close()
    assert not os.path.exists(scratch)


WIPE_TREE = r"""
import os, sys
from rewards.sandbox import scratch as cleanup
scratch, outside = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(outside, "keep"))
open(os.path.join(outside, "keep", "file"), "w").close()
os.symlink(outside, os.path.join(scratch, "link"))                   # a link to a folder of the app
os.symlink(os.path.join(outside, "keep", "file"), os.path.join(scratch, "filelink"))
locked = os.path.join(scratch, "locked")
os.makedirs(os.path.join(locked, "inner"))
open(os.path.join(locked, "inner", "x"), "w").close()
os.chmod(os.path.join(locked, "inner"), 0)
os.chmod(locked, 0)                                                  # mode 000, two levels
fd = os.open(scratch, os.O_RDONLY)
for _ in range(1500):                                                # deeper than PATH_MAX allows to name
    os.mkdir("d", dir_fd=fd)
    new = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.symlink(outside, "up", dir_fd=new)
    os.close(fd)
    fd = new
os.close(fd)
emptied = cleanup.wipe(scratch)
removed = cleanup.wipe(scratch, remove=True)
print(emptied, removed, os.path.exists(scratch), sorted(os.listdir(os.path.join(outside, "keep"))))
"""


def test_scratch_cleanup_is_iterative_follows_no_link_and_opens_mode_000_folders(tmp_path):
    """Run without CAP_DAC_OVERRIDE, as a host that is not root: modes 000 then stop it unless it fixes them."""
    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    outside.mkdir()
    proc = subprocess.run(
        [
            "setpriv",
            "--bounding-set",
            "-all",
            "--inh-caps",
            "-all",
            "--",
            sys.executable,
            "-c",
            WIPE_TREE,
            str(scratch),
            str(outside),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[0] == "True True False ['file']"


def test_scratch_cleanup_never_raises_on_a_path_that_is_gone():
    assert wipe("/nonexistent/grpo-sandbox-scratch") is True
    assert wipe("/nonexistent/grpo-sandbox-scratch", remove=True) is True


def test_columns_named_self_and__base_reach_the_function(isolated):
    sb = isolated("def f(completions, **kw):\n    return [float(kw['self'][0] + kw['_base'][0])] * len(completions)\n")
    assert sb.call(["a"], self=[1], _base=[2]).rewards == [3.0]


def test_a_runs_reward_functions_pass_columns_named_self_and__base_through(isolated):
    from grpo_web_protocol.config import RewardSpec, TrainConfig

    from workers.training.rewarding import reward_functions

    config = TrainConfig(
        model="m",
        dataset_path="d",
        output_dir="o",
        event_log="e",
        rewards=[
            RewardSpec(
                name="both",
                source="def f(completions, self, _base, **kw):\n"
                "    return [float(self[0] + _base[0])] * len(completions)\n",
                entrypoint="f",
            )
        ],
        allow_weak_sandbox=isolated.mode == "fallback",
    )
    funcs, _, closers = reward_functions(config)
    try:
        assert funcs[0](["a", "b"], prompts=["p", "q"], self=[1, 1], _base=[2, 2]) == [3.0, 3.0]
    finally:
        for closer in closers:
            closer.close()


def test_without_a_private_root_it_refuses_unless_weak_mode_is_on(sandbox, monkeypatch):
    on_the_hosts_uid(monkeypatch)
    monkeypatch.delenv("GRPO_SANDBOX_ALLOW_WEAK", raising=False)
    with pytest.raises(SandboxUnavailable) as exc:
        sandbox(hostile("pass"), private_mounts=False)
    assert "no private mount root" in exc.value.message and "GRPO_SANDBOX_ALLOW_WEAK" in exc.value.message
    monkeypatch.setenv("GRPO_SANDBOX_ALLOW_WEAK", "1")
    sb = sandbox(hostile("pass"), private_mounts=False)
    assert sb.isolation["private_mounts"] is False
    assert any(w.startswith("no private mount root") for w in sb.isolation["weak"])
    assert_next_call_works(sb)
