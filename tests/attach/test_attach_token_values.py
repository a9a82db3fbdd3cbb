"""A plain TRL script attached with ``token_sample_groups`` (tests/attach/grpo_script.py) against a live server: the
attached run's token view shows, per token, the values TRL itself computed at each update, bit for bit; a shard the
server refuses is set aside by the client's sender, and one too large is refused before it is read.

The oracle is TRL, watched in the script by the tests' own tracer on ``GRPOTrainer._compute_loss``
(tests/trl_oracle.py, as tests/workers/test_token_capture.py checks the app's own training program), and TRL's logged
entropy and clip ratio of each step."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.urls import reverse
from grpo_web_attach.tokens import shard_name

from runs.accounts.services import token_create
from runs.models import Run, StepMetric
from tests.attach.test_attach_end_to_end import logs, script, server
from tests.conftest import free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.filterwarnings("ignore::FutureWarning")]

G = 4


def test_an_attached_scripts_token_view_shows_trls_own_values(service_env, tiny_model, owner, owner_client, tmp_path):
    from transformers import AutoTokenizer

    _, token = token_create(owner=owner, name="gpu node", scope="attach")
    port, out, watched = free_port(), tmp_path / "out", tmp_path / "trl.json"
    # beta > 0: a reference model; num_iterations 2: step 2 trains on step 1's batch again, after an update, so TRL
    # computes old_per_token_logps at generation and the ratio moves off 1; -1: every group (2 a batch)
    env = {"BETA": "0.04", "NUM_ITERATIONS": "2", "TOKEN_SAMPLE_GROUPS": "-1", "WATCH_TRL": str(watched)}
    with server(service_env, port, tmp_path / "web.log") as url:
        proc = script(tiny_model, out, url, token, **env)
        assert proc.returncode == 0, logs(out)
        too_large = declared_too_large(url, token)
        hostile, said = send_a_hostile_shard(url, token, out, tmp_path)
    assert too_large == 413  # refused by its declared length, before a byte is read
    # the client's sender sets a shard the server refuses aside, names why, and goes on
    assert [p.name for p in (hostile / "refused").iterdir()] == [shard_name(1)] and not list(hostile.glob("*.parquet"))
    assert "refused token shard step-000001.parquet" in said[0] and "400: nothing was stored" in said[0], said
    run = Run.objects.get(owner=owner, origin=Run.Origin.ATTACHED)
    assert run.status == Run.Status.COMPLETED, (run.status, run.error)
    spool = out / "grpo-web-spool" / "tokens"
    assert sorted(p.name for p in spool.iterdir()) == [], "every shard sent, none refused"

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    calls = json.loads(watched.read_text())
    assert [c["step"] for c in calls] == [1, 2]  # one micro-batch per optimizer step
    moved = False
    for call in calls:
        step, inputs = call["step"], call["inputs"]
        assert owner_client.get(reverse("run_step_json", args=[run.pk, step])).json()["token_groups"] == [0, 1]
        view = owner_client.get(reverse("run_step_tokens_json", args=[run.pk, step])).json()
        shown = {c["index"]: c for c in view["completions"]}
        stored = {r["index"]: r for r in pq.read_table(run.run_dir / "tokens" / shard_name(step)).to_pylist()}
        assert sorted(shown) == sorted(stored) == list(range(2 * G))
        for j, index in enumerate(inputs["grpo_web_row"]):
            row, file_row = shown[index], stored[index]
            n = sum(inputs["completion_mask"][j])
            assert file_row["token_ids"] == inputs["completion_ids"][j][:n]
            assert (row["step"], row["update_step"], row["group"], row["completion"]) == (
                1,
                step,
                index // G,
                index % G,
            )
            assert row["tokens"] == tokenizer.batch_decode([[t] for t in inputs["completion_ids"][j][:n]])
            values = row["values"]
            # bit for bit: the float32 TRL had, as the double it is
            assert values["logprob"] == call["per_token_logps"][j][:n]
            assert values["old_logprob"] == call["old_per_token_logps"][j][:n] == inputs["old_per_token_logps"][j][:n]
            assert values["ref_logprob"] == inputs["ref_per_token_logps"][j][:n]
            assert values["entropy"] == call["entropies"][j][:n]
            assert values["ratio"] == call["coef_1"][j][:n]
            assert values["sampling_logprob"] is None  # no vLLM
            assert row["clipped_low"] == call["is_low_clipped"][j][:n]
            assert row["clipped_high"] == call["is_high_clipped"][j][:n]
            assert row["clipped"] == call["is_region_clipped"][j][:n]
            assert row["mask"] == [bool(m) for m in call["mask"][j][:n]]
            moved |= step == 2 and any(abs(r - 1.0) > 1e-4 for r in values["ratio"])
        # TRL's own logged figures of the step are the stored tokens' masked means
        logged = StepMetric.objects.get(run=run, step=step).metrics
        counted = [
            (e, c) for r in shown.values() for m, e, c in zip(r["mask"], r["values"]["entropy"], r["clipped"]) if m
        ]
        assert logged["entropy"] == pytest.approx(sum(e for e, _ in counted) / len(counted), rel=1e-5)
        assert logged["clip_ratio/region_mean"] == pytest.approx(sum(c for _, c in counted) / len(counted), abs=1e-6)
    assert moved, "the second pass over the batch should see a policy that moved"


def send_a_hostile_shard(url: str, token: str, out, tmp_path):
    """The client's own sender, given a spool whose step 1 shard is not Parquet: (its shard folder, what it logged)."""
    from grpo_web_attach.sender import Api, Sender

    state = json.loads((out / "grpo-web-spool" / "run.json").read_text())
    folder = tmp_path / "hostile-shards"
    folder.mkdir()
    (folder / shard_name(1)).write_bytes(b"step,index\n1,0\n")
    (tmp_path / "hostile.jsonl").touch()
    said: list[str] = []
    sender = Sender(
        Api(url, token),
        state["run_id"],
        state["resume_key"],
        tmp_path / "hostile.jsonl",
        tmp_path / "hostile-acked",
        log=said.append,
        shards=folder,
    )
    assert sender.pending() == len(b"step,index\n1,0\n")
    assert sender.send_once()
    assert sender.pending() == 0
    return folder, said


def declared_too_large(url: str, token: str) -> int:
    """A shard whose declared length is past GRPO_ATTACH_MAX_SHARD_BYTES: the status the server answers at once."""
    run = Run.objects.get(origin=Run.Origin.ATTACHED)
    address = urlparse(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    connection.putrequest("PUT", f"/api/attach/runs/{run.pk}/tokens/1")
    connection.putheader("Authorization", f"Bearer {token}")
    connection.putheader("Content-Length", str(settings.GRPO_ATTACH_MAX_SHARD_BYTES + 2 * 1024**2))
    connection.endheaders()
    try:
        return connection.getresponse().status
    finally:
        connection.close()


def test_a_sample_that_is_not_a_number_of_groups_is_refused_by_name(monkeypatch):
    from grpo_web_attach import sample_groups_setting

    monkeypatch.delenv("GRPO_WEB_TOKEN_SAMPLE_GROUPS", raising=False)
    assert sample_groups_setting(None) == 0  # off unless asked for
    for value in ("two", "-2", "1.5"):
        monkeypatch.setenv("GRPO_WEB_TOKEN_SAMPLE_GROUPS", value)
        with pytest.raises(ValueError, match=f"GRPO_WEB_TOKEN_SAMPLE_GROUPS is a number of groups .* not '{value}'"):
            sample_groups_setting(None)
    for value in ("two", -2, 1.5, True):
        with pytest.raises(ValueError, match="token_sample_groups is a number of groups"):
            sample_groups_setting(value)
    monkeypatch.setenv("GRPO_WEB_TOKEN_SAMPLE_GROUPS", "2")
    assert sample_groups_setting(None) == 2 and sample_groups_setting(-1) == -1  # the argument wins
