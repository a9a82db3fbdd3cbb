"""Fixtures: users, a dataset, and the real services (Redis, a Celery worker, the ASGI web server, chromium).

A fixture whose service is missing skips with the reason; under CI=true a skip is a failure, because CI provides
every service (see .ci/run).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.test import Client

from runs.lifecycle.demos import DEMO_GRPO, DEMO_SFT
from workers.processes import celery_worker_command, wait_until_answers

STRICT = os.environ.get("CI", "").lower() == "true"
# Playwright's sync API runs an event loop in the test thread; the ORM calls around it are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
BASE_DIR = Path(settings.BASE_DIR)
CHROMIUM = os.environ.get("GRPO_CHROMIUM", "/usr/bin/chromium")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    # GPU paths skip on machines without one, CI's included (bench/gpu_smoke.sh runs them on a GPU machine)
    if STRICT and report.skipped and not hasattr(report, "wasxfail") and not item.get_closest_marker("requires_gpu"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where every service must be present: {reason}"


# --- the small training values every test's runs train with ---------------------------------------------------
# A field a run leaves out takes TRL's default (GRPOConfig's 512-token completions at 1e-6 for three epochs; SFTConfig's
# 1024-token rows): minutes of training on 2 cores, where a test trains 1-3 steps. So the suite's runs train the tiny
# model with the demo's small values (runs.lifecycle.demos), set here, once, as the config dataclasses' defaults for
# the session: every run a test makes without them, by the form, a YAML, the API or a TrainConfig of its own, gets
# them. run_create stores every field, so the worker and training processes a test starts get them too.
# The trl_defaults fixture puts TRL's back (tests/lifecycle/test_omitted_fields_take_trls_defaults.py).
SMALL_GRPO, SMALL_SFT = DEMO_GRPO, DEMO_SFT


@contextlib.contextmanager
def dataclass_defaults(cls, values: dict):
    """``cls``'s field defaults set to ``values`` (its fields, its class attributes and its __init__'s defaults)
    inside the block."""
    import dataclasses

    fields = cls.__dataclass_fields__

    def apply(new: dict):
        for name, value in new.items():
            fields[name].default = value
            setattr(cls, name, value)
        cls.__init__.__defaults__ = tuple(f.default for f in dataclasses.fields(cls))

    saved = {name: fields[name].default for name in values}
    apply(values)
    try:
        yield
    finally:
        apply(saved)


@pytest.fixture(autouse=True, scope="session")
def small_training_values():
    from grpo_web_protocol.config import GRPOFields, SFTFields

    with dataclass_defaults(GRPOFields, SMALL_GRPO), dataclass_defaults(SFTFields, SMALL_SFT):
        yield


@pytest.fixture
def trl_defaults():
    """TRL's defaults back in the config dataclasses for one test."""
    from grpo_web_protocol.config import GRPOFields, SFTFields

    with dataclass_defaults(GRPOFields, TRL_GRPO), dataclass_defaults(SFTFields, TRL_SFT):
        yield


def _defaults(cls, names) -> dict:
    return {name: cls.__dataclass_fields__[name].default for name in names}


def _trl_values():
    from grpo_web_protocol.config import GRPOFields, SFTFields

    return _defaults(GRPOFields, SMALL_GRPO), _defaults(SFTFields, SMALL_SFT)


TRL_GRPO, TRL_SFT = _trl_values()  # read before the session fixture sets the small values


def wait_for(predicate, timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# --- users and data ---------------------------------------------------------------------------------------------


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user(username="owner", password="owner-pass")


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user(username="outsider", password="outsider-pass")


@pytest.fixture
def member(django_user_model):
    """A third user, for teams: a member of the owner's team in the sharing tests."""
    return django_user_model.objects.create_user(username="member", password="member-pass")


def logged_in(user):
    """A test client of its own, logged in as ``user`` (several users in one test)."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def outsider_client(client, outsider):
    client.force_login(outsider)
    return client


@pytest.fixture
def dataset_version(owner):
    from grpo_web_protocol.demo_data import arithmetic_rows

    from runs.datasets.services import dataset_import

    data = "".join(json.dumps(r) + "\n" for r in arithmetic_rows(64)).encode()
    return dataset_import(owner=owner, name="arithmetic", stream=io.BytesIO(data), source_name="arith.jsonl")


@pytest.fixture(scope="session")
def tiny_model():
    """The tiny model at the path runs name 'tiny'; built once per data folder."""
    from workers.training.tinymodel import build_tiny_model

    path = Path(settings.GRPO_TINY_MODEL_DIR)
    if not (path / "model.safetensors").exists():
        build_tiny_model(path)
    return path


# vLLM's CPU build (scripts/vllm_cpu.sh): its python, from GRPO_TEST_VLLM_CPU_PYTHON (.ci/run builds it and sets it
# for its vLLM lane); the tests that generate with vLLM skip without it, so the rest of the suite generates with
# transformers
VLLM_CPU_PYTHON = os.environ.get("GRPO_TEST_VLLM_CPU_PYTHON", "")
needs_vllm_cpu = pytest.mark.skipif(
    not (VLLM_CPU_PYTHON and os.access(VLLM_CPU_PYTHON, os.X_OK)),
    reason="no vLLM CPU environment: run `bash scripts/vllm_cpu.sh` and set GRPO_TEST_VLLM_CPU_PYTHON to the python "
    "it prints",
)


@pytest.fixture(scope="session")
def vllm_model():
    """The tiny model with 2 heads of 32 (vLLM's CPU attention takes no head size under 32), where runs may load
    it: a folder under the data folder's models."""
    from workers.training.tinymodel import build_tiny_model

    path = Path(settings.DATA_DIR) / "models" / "tiny-qwen2-h2"
    if not (path / "model.safetensors").exists():
        build_tiny_model(path, heads=2)
    return path


@pytest.fixture(scope="session")
def coldstart_model(tiny_model):
    """The tiny model after the R1 recipe's short cold-start SFT (workers.training.coldstart): it answers arithmetic in the
    \\boxed{} format, right now and then, so accuracy, pass@k and maj@k have signal. Built once per data folder."""
    from workers.training.coldstart import cold_start

    path = Path(settings.GRPO_TINY_SFT_MODEL_DIR)
    if not (path / "model.safetensors").exists():
        cold_start(tiny_model, path)
    return path


@pytest.fixture(scope="session")
def tools_model():
    """'tiny-tools': the tiny model with a Qwen-style tool chat template, cold-started on calculator calls
    (workers.training.coldstart.build_tool_model), so a run with the calculator sees TRL parse and run tool calls. Built once
    per data folder."""
    from workers.training.coldstart import build_tool_model

    path = Path(settings.GRPO_TINY_TOOLS_MODEL_DIR)
    if not (path / "model.safetensors").exists():
        build_tool_model(path)
    return path


@pytest.fixture
def eval_version(dataset_version):
    """The arithmetic rows with a quarter held out for evaluation."""
    import dataclasses

    from runs.datasets.mapping import Mapping
    from runs.datasets.services import dataset_version_map

    return dataset_version_map(
        version=dataset_version,
        mapping=dataclasses.replace(Mapping.of(dataset_version), split="fraction", eval_fraction=0.25, split_seed=3),
    )


# --- services ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_service():
    """The Redis the suite uses; an embedded one this session started is stopped at its end (nothing left running)."""
    import redis

    started = False
    if settings.REDIS_EMBEDDED:
        from grpo_web.embedded import ensure_redis, stop_redis

        socket_path = settings.DATA_DIR / "redis.sock"
        try:
            started = not (socket_path.exists() and redis.Redis(unix_socket_path=str(socket_path)).ping())
        except redis.RedisError:
            started = True
        ensure_redis(settings.DATA_DIR)
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.skip(f"Redis at {settings.REDIS_URL} is not reachable: {exc}")
    yield settings.REDIS_URL
    if started:
        stop_redis(settings.DATA_DIR)


def pytest_sessionfinish(session, exitstatus):
    """The embedded Redis of the test data folder goes with the session, whoever started it (a page, a queue)."""
    if settings.configured and settings.REDIS_EMBEDDED:
        from grpo_web.embedded import stop_redis

        stop_redis(settings.DATA_DIR)


def _database_url() -> str:
    """The test database, as a DATABASE_URL another process can open."""
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    auth = quote(s["USER"] or "", safe="") + (":" + quote(s["PASSWORD"], safe="") if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.fixture(scope="session")
def service_env(django_db_setup, django_db_blocker, redis_service):
    with django_db_blocker.unblock():
        url = _database_url()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "grpo_web.settings_test",
        "GRPO_DATA_DIR": str(settings.DATA_DIR),
        "PYTHONUNBUFFERED": "1",
        "GRPO_WORKER_BEAT": "2",
    }
    if not settings.REDIS_EMBEDDED:
        env["REDIS_URL"] = settings.REDIS_URL
    return env


def stop_process(proc: subprocess.Popen):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _answers_ping(app, name: str) -> bool:
    """Whether the worker answers, asked on a fresh broker connection: a pooled one may have been closed by a Redis
    restart (the fault tests restart it)."""
    with app.connection_for_write() as connection:
        return any(name in r for r in app.control.ping(timeout=0.5, connection=connection) or [])


def start_worker(env: dict, name: str, queues: str, log: Path) -> subprocess.Popen:
    """A real Celery worker process (its own session, so a test can kill it and everything it started)."""
    from grpo_web.celery import app

    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            celery_worker_command(queues, name),
            cwd=BASE_DIR,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: proc.poll() is not None or _answers_ping(app, name),
            timeout=60,
            what=f"the Celery worker {name} to answer ping",
        )
    except BaseException:
        stop_process(proc)  # no fixture teardown runs for a worker that never came up
        raise
    if proc.poll() is not None:
        raise AssertionError(f"the worker exited:\n{log.read_text()[-3000:]}")
    return proc


@pytest.fixture
def checks_queue(monkeypatch) -> str:
    """A checks queue of this test's own (GRPO_CHECKS_QUEUE): the session's celery_worker, which serves "checks", never
    takes its checks. Runs this process starts send their checks to it; give ``{"GRPO_CHECKS_QUEUE": name}`` to a web
    server or worker the test starts."""
    from grpo_web import queues

    name = f"checks-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(queues, "CHECKS_QUEUE", name)
    yield name
    with queues.current_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(name)


@pytest.fixture(scope="session")
def celery_worker(service_env, tiny_model, tmp_path_factory):
    """A real Celery worker process serving training and sandbox work, against the test database and real Redis."""
    name = f"test-{os.getpid()}@{socket.gethostname()}"
    proc = start_worker(
        service_env, name, "training,default,sandbox,checks", tmp_path_factory.mktemp("worker") / "w.log"
    )
    try:
        yield proc
    finally:
        stop_process(proc)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_web_server(env: dict, log: Path, port: int | None = None):
    """The ASGI app under uvicorn, as the demo and production run it (server-sent events need ASGI); its URL.
    ``port``: a given one (a server stopped and started again at the same address); else a free one."""
    port = port or free_port()
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "grpo_web.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
            cwd=BASE_DIR,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"

    try:
        try:
            wait_until_answers(proc, url + "/login/", 60, what="uvicorn", every=0.2)
        except RuntimeError as exc:
            raise AssertionError(f"{exc}:\n{log.read_text()[-3000:]}") from None
        yield url
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def web_server(service_env, tmp_path_factory):
    with running_web_server(service_env, tmp_path_factory.mktemp("web") / "web.log") as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
                "--disable-sync",
            ],
        )
        yield b
        b.close()


def log_in(page, web_server: str, username: str = "owner", password: str = "owner-pass") -> None:
    """Log in through the real login form and wait for the dashboard."""
    page.goto(f"{web_server}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_selector("text=Datasets")


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


def run_form_data(owner, run=None) -> dict:
    """What the run form posts when its user changes nothing: every field's initial value (a clone's: its parent's)."""
    from runs.lifecycle.forms import RunForm

    form = RunForm(owner=owner, run=run)
    data = {name: form.get_initial_for_field(field, name) for name, field in form.fields.items()}
    data.pop("config_extra", None)
    return {k: v for k, v in data.items() if v is not None and v != "" and v is not False and not callable(v)}


# --- a Ray cluster ----------------------------------------------------------------------------------------------

RAY_GCS_PORT = int(os.environ.get("GRPO_TEST_RAY_PORT", "6390"))  # clear of Redis's 6379


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """One local Ray cluster (a head node with 2 CPUs, its dashboard serving the Jobs API), started from this venv so
    its workers run the same Python; its address (http://...) as RAY_ADDRESS takes it. Module-scoped: only
    tests/workers/test_ray_engine.py uses it, so there is still one a session, and it is stopped, with every process it
    started, when that module ends (an idle head would otherwise take CPU from every test after it)."""
    ray = Path(sys.executable).parent / "ray"
    if not ray.exists():
        pytest.skip("ray is not installed (pip install 'ray[default,train]')")
    dashboard = free_port()
    log = tmp_path_factory.mktemp("ray") / "head.log"
    env = {**os.environ, "PYTHONPATH": str(BASE_DIR), "RAY_USAGE_STATS_ENABLED": "0"}
    with open(log, "wb") as fh:
        # --block keeps `ray start` in the foreground as the parent of the head's processes, in a session of its own:
        # stopping that session stops this cluster and no other
        proc = subprocess.Popen(
            [
                str(ray),
                "start",
                "--head",
                "--block",
                "--port",
                str(RAY_GCS_PORT),
                "--num-cpus",
                "2",
                "--num-gpus",
                "0",
                "--include-dashboard",
                "true",
                "--dashboard-host",
                "127.0.0.1",
                "--dashboard-port",
                str(dashboard),
                "--ray-client-server-port",
                str(free_port()),
                "--dashboard-agent-listen-port",
                str(free_port()),
                "--disable-usage-stats",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    address = f"http://127.0.0.1:{dashboard}"

    try:
        try:
            wait_until_answers(proc, address + "/api/version", 120, what="the Ray head's Jobs API (ray start)")
        except RuntimeError as exc:
            raise AssertionError(f"{exc}:\n{log.read_text()[-3000:]}") from None
        yield address
    finally:
        stop_session(proc.pid)


def stop_session(sid: int) -> None:
    """SIGTERM, then SIGKILL, every process of session ``sid`` (Ray's actors make process groups of their own, and
    `ray start --block` does not pass SIGTERM on, so the process group is not enough)."""
    import psutil

    def members():
        found = []
        for p in psutil.process_iter():
            try:
                if os.getsid(p.pid) == sid:
                    found.append(p)
            except (OSError, psutil.Error):
                continue
        return found

    for p in members():
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(members(), timeout=10)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=10)


@pytest.fixture(scope="module")
def ray_worker(service_env, ray_cluster, tiny_model, tmp_path_factory):
    """A real Celery worker that serves the Ray queue (it submits Ray runs to the session's cluster) and the sandbox
    queue (the runs' reward contract checks)."""
    name = f"ray-{os.getpid()}@{socket.gethostname()}"
    env = {**service_env, "RAY_ADDRESS": ray_cluster, "GRPO_TELEMETRY_SECONDS": "0.5"}  # samples within a short run
    proc = start_worker(env, name, "training-ray,sandbox,checks", tmp_path_factory.mktemp("ray-worker") / "w.log")
    try:
        yield proc
    finally:
        stop_process(proc)
