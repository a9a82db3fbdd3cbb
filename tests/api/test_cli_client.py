"""`grpo-web`, the installed command-line client, against a live server and a real worker: submit a run, watch it to
the end, export its rollouts with the browser's filters; refusals come back as the server's own messages."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runs.accounts.services import token_create
from runs.models import Run

pytestmark = [pytest.mark.django_db(transaction=True)]

CLI = str(Path(sys.executable).with_name("grpo-web"))
CONFIG = (
    "name: from the cli\nmodel_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [digit_ratio]\n"
    "num_generations: 4\nper_device_train_batch_size: 8\nmax_steps: 2\nlogging_steps: 1\n"
)


def cli(web_server, token, *args, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRPO_WEB_URL": web_server, "GRPO_WEB_TOKEN": token}
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=300, cwd=cwd)


def test_submit_watch_and_export_a_run(web_server, celery_worker, owner, dataset_version, tmp_path):
    _, token = token_create(owner=owner, name="cli", scope="write")
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG)

    submitted = cli(web_server, token, "submit", str(config), "--watch")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run = Run.objects.get(name="from the cli")
    assert f"queued run {run.pk}: {web_server}/runs/{run.pk}/" in submitted.stdout
    assert f"run {run.pk} completed step 2/2" in submitted.stdout
    assert run.status == Run.Status.COMPLETED and run.owner == owner

    out = tmp_path / "step2.jsonl"
    exported = cli(web_server, token, "export", str(run.pk), "--filter", "step_min=2", "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == run.rollouts.filter(step=2).count() == 8
    assert {r["step"] for r in rows} == {2}

    listed = cli(web_server, token, "runs", "--status", "completed")
    assert listed.returncode == 0 and "from the cli" in listed.stdout

    watched = cli(web_server, token, "watch", str(run.pk))
    assert watched.returncode == 0 and "completed step 2/2" in watched.stdout


def test_refusals_print_the_servers_messages_and_exit_2(web_server, owner, dataset_version, tmp_path):
    _, token = token_create(owner=owner, name="cli", scope="write")
    _, read_token = token_create(owner=owner, name="read", scope="read")
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("dataset_name: arithmetic", "dataset_name: nowhere"))
    refused = cli(web_server, token, "submit", str(bad))
    assert refused.returncode == 2 and "dataset_name: you have no dataset named 'nowhere'" in refused.stderr

    good = tmp_path / "good.yaml"
    good.write_text(CONFIG)
    read_only = cli(web_server, read_token, "submit", str(good))
    assert read_only.returncode == 2 and "only read" in read_only.stderr

    assert cli(web_server, "gwp_wrong", "runs").returncode == 2
    missing = cli(web_server, token, "export", "999999")
    assert missing.returncode == 2 and "404" in missing.stderr
    filt = cli(web_server, token, "export", "1", "--filter", "nonsense")
    assert filt.returncode == 2 and "key=value" in filt.stderr
    assert not Run.objects.exists()


def test_names_print_with_terminal_controls_escaped(web_server, owner, dataset_version):
    """A run named with escape sequences (retitle, clear the screen) and a bidi override prints them as escapes: a
    teammate's run name never acts on the terminal of whoever lists runs."""
    _, token = token_create(owner=owner, name="cli", scope="read")
    hostile = "ok\x1b]0;pwned\x07\x1b[2J\u202egnp.exe"
    run = Run.objects.create(
        owner=owner,
        name="ok",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config={"max_steps": 3},
        total_steps=3,
    )
    # names are stored clean (grpo_web.text.clean_names); a row from before that, or one written around the ORM's
    # save, may still hold them, and the client does not trust the server's text
    Run.objects.filter(pk=run.pk).update(name=hostile)
    listed = cli(web_server, token, "runs")
    assert listed.returncode == 0, listed.stderr
    assert "ok\\x1b]0;pwned\\x07\\x1b[2J\\u202egnp.exe" in listed.stdout
    assert not any(c in listed.stdout for c in "\x1b\x07\u202e")
