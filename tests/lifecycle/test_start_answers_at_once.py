"""Start answers at once (issue 44, item 3): a run with rewards of the user's code is stored as "checking" without
waiting for the sandbox; a worker of the checks queue then queues it or refuses it, and the refusal reaches the run
page, the API and the command-line client. A run cancelled while checking stays cancelled; a check the broker lost is
sent again."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rewards.services import reward_create
from runs.accounts.services import token_create
from runs.lifecycle.services import run_cancel, run_create, run_redispatch
from runs.lifecycle.spec import RunSpec
from runs.models import Run
from tests.api.conftest import api_client
from tests.conftest import log_in, running_web_server, start_worker, stop_process
from tests.lifecycle.test_run_reward_contract import CONFIG
from workers.reward_checks import run_contract_check

pytestmark = [pytest.mark.django_db(transaction=True)]

SHORT = "def short(completions, **kw):\n    return [1.0]\n"  # one score for a batch of many: TRL would fail on it


def _short(owner):
    return reward_create(owner=owner, name="short", entrypoint="short", source_code=SHORT)


def _spec(rf, dataset_version, name="r") -> RunSpec:
    return RunSpec(
        name=name,
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": rf.name, "weight": 1.0, "version_id": rf.latest_version.pk}],
        config=CONFIG,
    )


def _purge(queue: str) -> int:
    from celery import current_app

    with current_app.connection_for_write() as connection:
        return connection.default_channel.queue_purge(queue) or 0


def test_in_chromium_start_answers_before_any_worker_checks_and_the_refusal_reaches_the_page(
    service_env, checks_queue, tiny_model, owner, dataset_version, page, tmp_path
):
    """No worker serves the checks queue when Start is pressed, so the answer cannot have waited for the check; the
    refusal arrives on the open page, without a reload, once a checks worker is started."""
    _short(owner)
    env = {**service_env, "GRPO_CHECKS_QUEUE": checks_queue}
    with running_web_server(env, tmp_path / "web.log") as web_server:
        _start_and_see_the_refusal(web_server, env, page, tmp_path)


def _start_and_see_the_refusal(web_server, env, page, tmp_path):
    log_in(page, web_server)
    page.goto(f"{web_server}/runs/new/")
    page.fill("#id_name", "answers at once")
    page.fill("#id_max_steps", "2")
    page.fill("#id_num_generations", "4")
    page.fill("#id_per_device_train_batch_size", "8")
    page.locator("tr:has(a:text-is('short')) input[type=checkbox]").check()
    page.click("button:text('Start run')")
    page.wait_for_url("**/runs/*/")
    assert page.inner_text("#run-status") == "checking rewards"
    page.wait_for_selector("#run-speed:has-text('checking the rewards in the sandbox')")
    page.evaluate("window.loadMarker = 'same page'")
    run = Run.objects.get(name="answers at once")
    assert run.status == Run.Status.CHECKING

    name = f"checks-{os.getpid()}@{socket.gethostname()}"
    worker = start_worker(env, name, env["GRPO_CHECKS_QUEUE"], tmp_path / "w.log")
    try:
        page.wait_for_selector("#run-status.failed", timeout=120_000)
    finally:
        stop_process(worker)
    assert page.evaluate("window.loadMarker") == "same page"
    error = page.inner_text("#run-error")
    assert "Refused before it was queued" in error and "reward 'short'" in error
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and any("reward 'short'" in r for r in run.refusal)
    page.wait_for_selector("#retry-form", state="visible")  # fix the reward, then retry or clone


def test_the_api_answers_checking_then_the_run_says_its_refusal(owner, dataset_version, checks_queue):
    rf = _short(owner)
    yaml = (
        "name: api run\nmodel_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [short]\n"
        "num_generations: 4\nper_device_train_batch_size: 8\nmax_steps: 2\n"
    )
    client = api_client(owner)
    started = client.post("/api/runs", {"yaml": yaml}, content_type="application/json")
    assert started.status_code == 201, started.content
    assert started.json()["status"] == "checking" and started.json()["refusal"] == []
    run_id = started.json()["id"]
    assert _purge(checks_queue) == 1  # what a checks worker would take; here it runs in this process
    run_contract_check(run_id)
    body = client.get(f"/api/runs/{run_id}").json()
    assert body["status"] == "failed"
    assert any("reward 'short'" in r and "InvalidResult" in r for r in body["refusal"])
    assert rf.latest_version.source == SHORT


def test_the_cli_waits_for_the_check_and_exits_2_with_the_refusal(
    web_server, celery_worker, owner, dataset_version, tmp_path
):
    _short(owner)
    _, token = token_create(owner=owner, name="cli", scope="write")
    config = tmp_path / "run.yaml"
    config.write_text(
        "name: cli run\nmodel_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [short]\n"
        "num_generations: 4\nper_device_train_batch_size: 8\nmax_steps: 2\n"
    )
    env = {**os.environ, "GRPO_WEB_URL": web_server, "GRPO_WEB_TOKEN": token}
    cli = str(Path(sys.executable).with_name("grpo-web"))
    done = subprocess.run([cli, "submit", str(config)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    run = Run.objects.get(name="cli run")
    assert f"refused run {run.pk}" in done.stderr and "reward 'short'" in done.stderr
    assert "queued run" not in done.stdout


def test_a_run_cancelled_while_checking_stays_cancelled(owner, dataset_version, checks_queue):
    run = run_create(owner=owner, spec=_spec(_short(owner), dataset_version))
    assert run.status == Run.Status.CHECKING
    assert run_cancel(run=run).status == Run.Status.CANCELLED
    run_contract_check(run.pk)  # the check arrives late: it leaves the run alone
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.refusal == [] and run.queued_at is None


def test_a_check_the_broker_lost_is_sent_again(owner, dataset_version, checks_queue):
    run = run_create(owner=owner, spec=_spec(_short(owner), dataset_version))
    assert _purge(checks_queue) == 1  # Redis restarted without its data
    assert run_redispatch(grace_seconds=0) == [run]
    assert run_redispatch(grace_seconds=0) == []  # held by the broker again: not sent twice
    assert _purge(checks_queue) == 1


def test_a_run_of_built_ins_only_is_queued_at_once(owner, dataset_version, checks_queue, monkeypatch):
    queued = []  # no training worker of the session trains it while this test's database is flushed
    monkeypatch.setattr("runs.lifecycle.services._enqueue", queued.append)
    spec = RunSpec(
        name="built-ins",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "think_format", "weight": 1.0, "builtin": "think_format"}],
        config=CONFIG,
    )
    run = run_create(owner=owner, spec=spec)
    assert run.status == Run.Status.QUEUED and queued == [run]
    assert _purge(checks_queue) == 0


def test_the_cli_waits_for_a_check_no_worker_makes_only_so_long():
    """No worker serves the checks queue: `submit` stops waiting at its limit instead of hanging."""
    from grpo_web.client import checked

    class Server:  # a server whose run stays "checking"
        asked = 0

        def json(self, method, path):
            self.asked += 1
            return {"id": 7, "status": "checking", "url": "/runs/7/"}

    server = Server()
    run = checked(server, {"id": 7, "status": "checking"}, interval=0.01, limit=0.2)
    assert run["status"] == "checking" and 1 <= server.asked <= 25
