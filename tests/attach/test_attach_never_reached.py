"""A plain TRL script (tests/attach/grpo_script.py) whose server is never reached: at its end it waits for the server
quietly (backoff, no busy loop: its CPU time stays a small part of the wait) and for a bounded time, then says in one
line what is left and how to send it. Doing what that line says, running the script again from its last checkpoint
with the server up, sends the first attempt's rows too: every step TRL trained arrives once, labelled as TRL's own
completions tables label it, in one run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runs.accounts.services import token_create
from runs.models import Rollout, Run
from tests.attach.test_attach_end_to_end import assert_rows_are_trls, logs, script, server
from tests.conftest import free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.filterwarnings("ignore::FutureWarning")]

WAIT_S = 8  # the script's flush_timeout: how long it waits at its end for a server that does not answer


def cpu_seconds(pid: int) -> float:
    """The process's CPU time, user and system, all its threads (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def the_final_wait(proc, spool: Path, log: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the script from the end of its training (TRL's last log, with its
    train_runtime, is in the spool) to the end of its wait for the server (its line on what it did not send)."""
    deadline = time.monotonic() + 600
    while b"train_runtime" not in (spool.read_bytes() if spool.exists() else b""):
        assert proc.poll() is None and time.monotonic() < deadline, "the script ended before its training did"
        time.sleep(0.1)
    cpu0, wall0 = cpu_seconds(proc.pid), time.monotonic()
    cpu, wall = cpu0, wall0
    while b"of this run not sent" not in log.read_bytes():
        assert proc.poll() is None and time.monotonic() < deadline, "the script ended without saying what is left"
        cpu, wall = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(0.1)
    return cpu - cpu0, wall - wall0


def test_a_never_reached_server_is_waited_for_quietly_and_a_resume_sends_every_step_once(
    service_env, tiny_model, owner, tmp_path
):
    _, token = token_create(owner=owner, name="gpu node", scope="attach")
    port, out = free_port(), tmp_path / "out"
    url = f"http://127.0.0.1:{port}"
    spool = out / "grpo-web-spool" / "events.jsonl"

    # no server at all: the script trains its 2 steps, spools them, and waits at its end
    first = script(tiny_model, out, url, token, wait=False, FLUSH_TIMEOUT=str(WAIT_S))
    cpu, wall = the_final_wait(first, spool, out.parent / "out-0.log")
    assert first.wait(timeout=120) == 0, logs(out)
    said = [line for p in out.parent.glob("*.log") for line in p.read_text().splitlines() if "grpo-web:" in line]
    assert len([s for s in said if "retr" in s]) == 1, said[:5]  # said once, not at each retry
    assert cpu < 0.1 * wall, (cpu, wall)  # waiting, not spinning
    left = [s for s in said if "not sent" in s]
    assert len(left) == 1 and f"run this script again from its last checkpoint in {out}" in left[0], said
    assert not Run.objects.exists()
    assert (out / "checkpoint-2").is_dir() and spool.stat().st_size > 0

    # what it said: run it again from its last checkpoint, with the server up
    with server(service_env, port, tmp_path / "web.log"):
        again = script(tiny_model, out, url, token, "--resume")
        assert again.returncode == 0, logs(out)
    run = Run.objects.get(owner=owner)
    assert run.status == Run.Status.COMPLETED, (run.status, run.error)
    # transformers, resumed from the last checkpoint, trains one more step (3; its checkpoint-3 and TRL's
    # completions_00003 say so): the rows of each step TRL trained are TRL's, once, and no label goes past them
    trained = sorted(int(p.stem.split("_")[1]) for p in (out / "completions").glob("completions_*.parquet"))
    assert trained == [1, 2, 3] and (out / "checkpoint-3").is_dir()
    assert_rows_are_trls(run, out, 3)
    assert set(Rollout.objects.filter(run=run).values_list("step", flat=True)) == set(trained)
