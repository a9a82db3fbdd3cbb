"""A plain TRL script (tests/attach/grpo_script.py) with the attach client, against a live server: what the server
stores is TRL's own completions table, row for row and bit for bit, through a server outage and a training process
killed and resumed from its checkpoint (and the token shards of each step with it); a multi-turn run's tool calls
and results as TRL logged them."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from django.urls import reverse
from grpo_web_attach.tokens import shard_name

from runs.accounts.services import token_create
from runs.models import Replay, ReplayRow, Rollout, Run, StepMetric
from runs.text import as_text
from tests.conftest import BASE_DIR, free_port, running_web_server, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.filterwarnings("ignore::FutureWarning")]

SCRIPT = Path(__file__).with_name("grpo_script.py")
NAMES = ["digit_ratio", "sometimes_none"]


def server(env: dict, port: int, log: Path):
    """The app under uvicorn at ``port``, the same each time: a client's URL outlives a restart."""
    return running_web_server(env, log, port=port)


def script(
    tiny_model, out: Path, url: str, token: str, *args, wait=True, launch=(), python=sys.executable, **env
) -> subprocess.Popen:
    """The user's script in a process of its own, run by ``python`` (``launch``: the launcher's arguments before it,
    as accelerate's); no Django settings or project path in its environment: only this checkout's client, attach/, as
    if installed."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "DATABASE", "GRPO_")) and k != "VIRTUAL_ENV"
    }
    clean["PYTHONPATH"] = str(BASE_DIR / "attach")
    environment = {**clean, "GRPO_WEB_URL": url, "GRPO_WEB_TOKEN": token, "HF_HUB_OFFLINE": "1", **env}
    log = open(out.parent / f"{out.name}-{len(list(out.parent.glob('*.log')))}.log", "wb")
    proc = subprocess.Popen(
        [python, *launch, str(SCRIPT), str(tiny_model), str(out), *args],
        cwd=out.parent,
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    if wait:
        proc.wait(timeout=600)
    return proc


def same(stored, trl) -> bool:
    if stored is None or (isinstance(stored, float) and math.isnan(stored)):
        return trl is None or (isinstance(trl, float) and math.isnan(trl))
    return stored == trl


def assert_rows_are_trls(run: Run, out: Path, steps: int):
    tables = sorted((out / "completions").glob("completions_*.parquet"))
    assert len(tables) == steps
    assert Rollout.objects.filter(run=run).count() == sum(len(pd.read_parquet(p)) for p in tables)
    for path in tables:
        step, table = int(path.stem.split("_")[1]), pd.read_parquet(path)
        rows = list(Rollout.objects.filter(run=run, step=step).order_by("index"))
        assert len(rows) == len(table), (step, len(rows), len(table))
        assert [r.prompt for r in rows] == list(table["prompt"])
        assert [r.completion for r in rows] == list(table["completion"])
        for k, fn in enumerate(NAMES):
            assert all(same(r.rewards[k], v) for r, v in zip(rows, table[fn].tolist())), (step, fn)
        assert [r.advantage for r in rows] == table["advantage"].tolist(), step
        assert {r.columns["answer"] for r in rows} <= {str(2 * a + 1) for a in range(32)}
    assert sorted(StepMetric.objects.filter(run=run).values_list("step", flat=True)) == list(range(1, steps + 1))


def assert_shards_join_rollouts(run: Run, out: Path, steps: int, groups: int):
    """Each step's token shard on the server holds the first ``groups`` groups of the step's rollouts (each
    completion's tokens as many as its length), and the client's spool has sent them all."""
    for step in range(1, steps + 1):
        rows = pq.read_table(run.run_dir / "tokens" / shard_name(step)).to_pylist()
        rollouts = {r.index: r for r in Rollout.objects.filter(run=run, step=step, group__lt=groups)}
        assert sorted(r["index"] for r in rows) == sorted(rollouts), step
        assert all(r["update_step"] == r["step"] == step for r in rows)
        assert [len(r["token_ids"]) for r in rows] == [rollouts[r["index"]].length for r in rows], step
    assert sorted(p.name for p in (run.run_dir / "tokens").iterdir()) == [shard_name(s) for s in range(1, steps + 1)]
    assert not list((out / "grpo-web-spool" / "tokens").iterdir())


def logs(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(out.parent.glob("*.log")))


def trained_attached(service_env, model, owner, tmp_path, *args, python=sys.executable, **env) -> tuple[Run, Path]:
    """The script (``args`` its flags, ``env`` beside its environment, run by ``python``) trains ``model`` attached to
    a live server with a token of scope attach: the run it made, completed, and its output_dir."""
    _, token = token_create(owner=owner, name="gpu node", scope="attach")
    port, out = free_port(), tmp_path / "out"
    with server(service_env, port, tmp_path / "web.log"):
        proc = script(model, out, f"http://127.0.0.1:{port}", token, *args, python=python, **env)
        assert proc.returncode == 0, logs(out)
    run = Run.objects.get(owner=owner, origin=Run.Origin.ATTACHED)
    assert run.status == Run.Status.COMPLETED, (run.status, run.error)
    return run, out


def replayed(owner_client, run: Run, form: dict, query: str = "") -> tuple[Replay, dict]:
    """A replay posted from the rollout browser's form (``query``: its filters), run by the Celery worker: the replay
    and its JSON, completed."""
    response = owner_client.post(reverse("run_replay_new", args=[run.pk]) + query, form)
    replay = Replay.objects.get(run=run)
    assert response.status_code == 302 and response["Location"] == replay.get_absolute_url()
    url = reverse("run_replay_json", args=[run.pk, replay.pk])
    wait_for(lambda: owner_client.get(url).json()["status"] in ("completed", "failed"), 120, what="the replay")
    data = owner_client.get(url).json()
    assert data["status"] == "completed", data["error"]
    return replay, data


def test_a_trl_script_sends_trls_own_rows(service_env, tiny_model, owner, tmp_path):
    run, out = trained_attached(service_env, tiny_model, owner, tmp_path)
    assert (run.name, run.total_steps, run.step, run.dataset_version_id) == ("attached", 2, 2, None)
    assert [r["name"] for r in run.rewards] == NAMES and "def digit_ratio" in run.rewards[0]["source"]
    assert run.config["num_generations"] == 4 and str(tiny_model) in run.model
    assert str(SCRIPT) in run.reported_command and run.reported_host
    assert_rows_are_trls(run, out, 2)
    # the reproducibility record the client sent: the script's libraries (as they name their own versions), its
    # source as it is on disk and its git state, and its seed
    import transformers
    import trl

    record = run.provenance
    assert (record["libraries"]["trl"], record["libraries"]["transformers"]) == (
        trl.__version__,
        transformers.__version__,
    )
    assert record["seed"] == run.config["seed"] == 11
    script_record = record["script"]
    assert script_record["source"] == SCRIPT.read_text() and not script_record["truncated"]
    assert script_record["sha256"] == hashlib.sha256(SCRIPT.read_bytes()).hexdigest()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=SCRIPT.parent, capture_output=True, text=True)
    assert script_record["git"]["commit"] == head.stdout.strip()
    assert not (run.run_dir / "tokens").exists()  # no token values unless asked for


def test_a_server_outage_and_a_killed_trainer_lose_and_duplicate_nothing(service_env, tiny_model, owner, tmp_path):
    _, token = token_create(owner=owner, name="gpu node", scope="attach")
    port, out = free_port(), tmp_path / "out"
    url = f"http://127.0.0.1:{port}"
    tokens = {"GRPO_WEB_TOKEN_SAMPLE_GROUPS": "1"}  # and the token values of the first group of each batch
    with server(service_env, port, tmp_path / "web.log"):
        # killed (SIGKILL: no flush, no finish) at the end of step 3; checkpoint-2 is the last whole checkpoint
        killed = script(tiny_model, out, url, token, MAX_STEPS="4", KILL_AT_STEP="3", **tokens)
        assert killed.returncode == -9, logs(out)
        run = Run.objects.get(owner=owner, origin=Run.Origin.ATTACHED)
        assert run.status == Run.Status.RUNNING
    # the server is down for 30 s: when the script resumes from its checkpoint, while it trains and spools, and
    # while it waits at its end to send what it holds; it comes back and gets everything
    down = time.monotonic()
    resumed = script(tiny_model, out, url, token, "--resume", wait=False, MAX_STEPS="4", **tokens)
    spool = out / "grpo-web-spool" / "events.jsonl"
    size = spool.stat().st_size
    wait_for(
        lambda: spool.stat().st_size > size + 1000, 300, what="the resumed script spooling while the server is down"
    )
    time.sleep(max(2.0, 30 - (time.monotonic() - down)))
    assert resumed.poll() is None, logs(out)  # still there: training, or waiting to send
    with server(service_env, port, tmp_path / "web.log"):
        assert resumed.wait(timeout=600) == 0, logs(out)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, (run.status, run.error)
    assert Run.objects.filter(owner=owner).count() == 1  # the resumed script continued the same run
    assert_rows_are_trls(run, out, 4)
    assert_shards_join_rollouts(run, out, 4, groups=1)


def test_a_script_that_only_takes_callbacks_sends_trls_own_rows(service_env, tiny_model, owner, tmp_path):
    # open-r1's grpo.py: GRPOTrainer(..., callbacks=get_callbacks(...)), no line to call attach() in
    run, out = trained_attached(service_env, tiny_model, owner, tmp_path, "--callback")
    assert (run.name, run.total_steps, run.step) == ("attached by callback", 2, 2)
    assert [r["name"] for r in run.rewards] == NAMES
    assert_rows_are_trls(run, out, 2)


def test_a_model_that_writes_nul_is_stored_as_trl_logged_it(service_env, tiny_model, owner, tmp_path):
    # PostgreSQL's text and jsonb cannot hold NUL: the completions TRL logged and the dataset's columns come back
    # exactly, NUL and the sign that stands for it (U+2400) included
    run, out = trained_attached(service_env, tiny_model, owner, tmp_path, NUL_BIAS="6")
    assert_rows_are_trls(run, out, 2)
    rows = list(Rollout.objects.filter(run=run))
    assert sum("\x00" in r.completion for r in rows) >= 4
    assert all(r.columns["note"] == f"row\x00{int(r.columns['answer']) // 2} \u2400" for r in rows)


def test_two_processes_under_accelerate_send_every_rank_s_rows_once(service_env, tiny_model, owner, tmp_path):
    # accelerate launch --multi_gpu --num_processes 2 on a machine without GPUs: torchrun starts 2 processes and the
    # script's use_cpu makes them a gloo group (--cpu would start one process only); each rank generates half of a
    # batch, the capture gathers it, the main rank sends it
    run, out = trained_on_two_ranks(service_env, tiny_model, owner, tmp_path, "--multi_gpu")
    assert_every_rank_s_rows_once(run, owner, out)


def test_two_processes_without_use_cpu_are_one_run_sent_once(service_env, tiny_model, owner, tmp_path):
    # the same command for a script written for GPUs (no use_cpu), on a machine without them: accelerate finds no GPU
    # and makes each process a trainer of its own (not distributed, each its own main process), both in one
    # output_dir. The launch is one run, process 0's; process 1 says why it sends nothing and writes no spool
    run, out = trained_on_two_ranks(
        service_env, tiny_model, owner, tmp_path, "--multi_gpu", USE_CPU="0", CUDA_VISIBLE_DEVICES=""
    )
    assert_rows_are_trls(run, out, 2)
    assert Rollout.objects.filter(run=run, step=1).count() == 8  # a whole batch a step, each row stored once
    assert_shards_join_rollouts(run, out, 2, groups=2)
    assert Run.objects.filter(owner=owner).count() == 1
    said = "".join(p.read_text(errors="replace") for p in out.parent.glob("*.log"))
    assert "grpo-web: process 1 of 2 trains alone" in said


def test_two_processes_under_deepspeed_zero3_send_every_rank_s_rows_once(service_env, tiny_model, owner, tmp_path):
    # accelerate launch --use_deepspeed with ZeRO-3, as TRL's docs train, on DeepSpeed's CPU accelerator over gloo:
    # the model's weights are partitioned across the two ranks from the start (zero.Init), TRL gathers them to
    # generate, and the client's capture reads no weight
    if not (DEEPSPEED_LIB / "deepspeed").is_dir():
        pytest.skip(f"no DeepSpeed in {DEEPSPEED_LIB} (bash scripts/dev.sh install puts it there)")
    config = tmp_path / "zero3.json"
    config.write_text(json.dumps(ZERO3))
    deepspeed = ["--use_deepspeed", "--deepspeed_config_file", str(config), "--zero3_init_flag", "true"]
    # DeepSpeed on its CPU accelerator (a GPU machine runs this test on the CPU too), no prebuilt ops: its shared
    # memory op is built once by torch's extension loader (cached under ~/.cache/torch_extensions)
    beside = {
        "PYTHONPATH": os.pathsep.join([str(BASE_DIR / "attach"), str(DEEPSPEED_LIB)]),
        "PATH": os.pathsep.join([str(DEEPSPEED_LIB / "bin"), os.environ.get("PATH", "")]),  # its ninja, to build it
    }
    run, out = trained_on_two_ranks(
        service_env,
        tiny_model,
        owner,
        tmp_path,
        *deepspeed,
        teardown_abort=True,
        DS_ACCELERATOR="cpu",
        CUDA_VISIBLE_DEVICES="",
        **beside,
    )
    assert_every_rank_s_rows_once(run, owner, out)
    # it trained under ZeRO-3: each rank saved its own partition of the weights
    saved = sorted(p.name for p in (out / "checkpoint-2" / "global_step2").glob("*model_states.pt"))
    assert saved == [f"zero_pp_rank_{r}_mp_rank_00_model_states.pt" for r in (0, 1)]


# DeepSpeed beside the environment (scripts/dev.sh install), on the script's PYTHONPATH only: the ninja build tool it
# needs is a top-level module `ninja` that would overwrite django-ninja's in the environment
DEEPSPEED_LIB = Path(sys.prefix) / "deepspeed-lib"

# a DeepSpeed config with what TRL's accelerate config for ZeRO-3 (deepspeed_zero3.yaml) sets: stage 3, no offload,
# bf16 (GRPOConfig's, through "auto": the Trainer fills in its own values); the optimizer is the Trainer's, torch's AdamW
ZERO3 = {
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "none"}, "offload_param": {"device": "none"}},
}


# DeepSpeed on its CPU accelerator: a rank sometimes aborts in C++ teardown once the script has returned (1 exit in 3
# to 7 here, whether or not the script calls destroy_process_group()); torchrun then stops the other rank, whose
# client may not have sent its last batch yet. Outside grpo-web: such a launch is made again, from a clean slate
TEARDOWN_ABORT = "terminate called without an active exception"


def trained_on_two_ranks(
    service_env, model, owner, tmp_path, *flags, teardown_abort: bool = False, **env
) -> tuple[Run, Path]:
    """The script under ``accelerate launch`` with 2 processes (``flags``: the backend's), attached to a live server
    with every group's token values (each rank keeps its rows' values, the main rank's shard gathers them): the run
    it made, completed, and its output_dir. ``teardown_abort``: a launch that failed by TEARDOWN_ABORT after training
    ended is made again (at most twice), its run deleted first."""
    _, token = token_create(owner=owner, name="gpu node", scope="attach")
    for attempt in range(3 if teardown_abort else 1):
        port, out = free_port(), tmp_path / f"launch-{attempt}" / "out"
        out.parent.mkdir()
        launch = ["-m", "accelerate.commands.launch", *flags, "--num_processes", "2", "--num_machines", "1"]
        launch += ["--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port())]
        with server(service_env, port, out.parent / "web.log"):
            url = f"http://127.0.0.1:{port}"
            proc = script(model, out, url, token, launch=launch, TOKEN_SAMPLE_GROUPS="-1", **env)
        said = "".join(p.read_text(errors="replace") for p in out.parent.glob("*.log"))
        if proc.returncode == 0 or not (teardown_abort and TEARDOWN_ABORT in said and "'train_runtime'" in said):
            break
        Run.objects.filter(owner=owner).delete()
    assert proc.returncode == 0, logs(out)
    run = Run.objects.get(owner=owner, origin=Run.Origin.ATTACHED)
    assert run.status == Run.Status.COMPLETED, (run.status, run.error)
    return run, out


def assert_every_rank_s_rows_once(run: Run, owner, out: Path):
    assert_rows_are_trls(run, out, 2)
    assert Rollout.objects.filter(run=run, step=1).count() == 16  # 8 a rank, each stored once
    assert_shards_join_rollouts(run, out, 2, groups=4)
    assert Run.objects.filter(owner=owner).count() == 1  # the second rank made no run of its own


# the tool run's reward, edited for a replay: a digest of exactly what it is passed, the prompt's messages and the
# completion's turns (tool calls and results), beside the row's answer
EDITED_BOXED = """def boxed_answer(completions, prompts, answer, **kwargs):
    import hashlib
    import json

    def digest(*values):
        return int(hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:6], 16) / 2**24

    return [digest(p, c, a) for p, c, a in zip(prompts, completions, answer)]
"""


def test_a_multi_turn_run_s_tool_calls_and_results_arrive_as_trl_logged_them(
    service_env, celery_worker, tools_model, owner, owner_client, tmp_path
):
    # TRL's own tool loop (GRPOTrainer(tools=[calculator])) on chat prompts; the model, cold-started on calculator
    # calls, calls the tool, and TRL runs the script's calculator and appends its result as a tool turn
    from tests.attach.grpo_script import calculator
    from tests.workers.test_tool_run import _plain

    run, out = trained_attached(service_env, tools_model, owner, tmp_path, "--tools")
    assert [r["name"] for r in run.rewards] == ["boxed_answer"]

    tables = sorted((out / "completions").glob("completions_*.parquet"))
    assert len(tables) == 2
    calls = 0
    for path in tables:
        step, table = int(path.stem.split("_")[1]), pd.read_parquet(path)
        rows = list(Rollout.objects.filter(run=run, step=step).order_by("index"))
        # each stored transcript is TRL's completion, turn for turn: the tool calls and the tools' results
        assert [r.messages for r in rows] == [_plain(c) for c in table["completion"]], step
        assert [r.prompt for r in rows] == [as_text(_plain(p)) for p in table["prompt"]], step
        assert [r.advantage for r in rows] == table["advantage"].tolist(), step
        assert [r.rewards[0] for r in rows] == table["boxed_answer"].tolist(), step
        for r in rows:
            for i, message in enumerate(r.messages):
                for call in message.get("tool_calls") or []:
                    if i + 1 == len(r.messages):
                        continue  # TRL rolls back a result that would pass max_completion_length, and stops
                    calls += 1
                    result = r.messages[i + 1]
                    assert result["role"] == "tool" and result["name"] == call["function"]["name"] == "calculator"
                    try:
                        expected = calculator(**call["function"]["arguments"])
                    except Exception as exc:  # what TRL shows the model when a tool fails
                        assert result["content"].startswith("{'error'") and str(exc) in result["content"]
                    else:
                        assert result["content"] == expected  # the script's own calculator's answer
    assert calls > 0  # the cold-started model calls the calculator, and TRL runs it

    # the JSON API and the rollout browser's own JSON give the same turns
    stored = {r.pk: r.messages for r in Rollout.objects.filter(run=run)}
    api = owner_client.get(f"/api/runs/{run.pk}/rollouts?step_min=1&step_max=2")
    assert api.status_code == 200, api.content
    browser = owner_client.get(reverse("run_rollouts_json", args=[run.pk]) + "?step_min=1&step_max=2")
    assert browser.status_code == 200, browser.content
    for answer in (api.json(), browser.json()):
        assert answer["rows"] and all(row["messages"] == stored[row["id"]] for row in answer["rows"])
        assert any(m.get("tool_calls") for row in answer["rows"] for m in row["messages"])
    groups = owner_client.get(f"/api/runs/{run.pk}/steps/1").json()["groups"]
    shown = [c for g in groups for c in g["completions"]]
    assert len(shown) == 8 and all(c["messages"] for c in shown)

    # a replay of the run against its reward, edited: the sandbox is passed each prompt's messages (from the run's
    # event log: the run has no dataset) and each completion's turns as TRL passed them, the row's answer beside
    edited = {}
    exec(EDITED_BOXED, edited)
    replay, data = replayed(owner_client, run, {"weight-0": "1", "source-0": EDITED_BOXED.replace("\n", "\r\n")})
    assert [r["label"] for r in data["rewards"]] == ["boxed_answer (edited source)"]
    new = {(r.step, r.index): r.new_rewards for r in ReplayRow.objects.filter(replay=replay)}
    assert len(new) == Rollout.objects.filter(run=run).count() == 16
    for path in tables:
        step, table = int(path.stem.split("_")[1]), pd.read_parquet(path)
        answers = [r.columns["answer"] for r in Rollout.objects.filter(run=run, step=step).order_by("index")]
        prompts, completions = [_plain(p) for p in table["prompt"]], [_plain(c) for c in table["completion"]]
        expected = edited["boxed_answer"](completions, prompts, answers)
        assert [new[(step, i)] for i in range(len(table))] == [[v] for v in expected], step
