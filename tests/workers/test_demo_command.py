"""`manage.py demo` stops everything it started when it is told to stop, or when it is killed."""

from __future__ import annotations

import signal
import subprocess
import sys

import psutil
import pytest

from tests.conftest import BASE_DIR, free_port, stop_process, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def start_demo(service_env, tmp_path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """The demo on the test database and Redis; its web server and workers, once they are up."""
    port = free_port()
    log = open(tmp_path / "demo.log", "wb")
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(port)],
        cwd=BASE_DIR,
        env=service_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def servers() -> list[psutil.Process]:
        assert demo.poll() is None, (tmp_path / "demo.log").read_text()[-3000:]
        return psutil.Process(demo.pid).children()

    wait_for(lambda: len(servers()) == 4, timeout=120, what="the demo's web server and three workers")
    # the Start's contract check has a worker of its own, never behind a reward test, a replay or an import
    wait_for(lambda: ["checks"] in served_queues(), timeout=60, what="the demo's checks worker to serve its queue")
    return demo, servers()


def served_queues() -> list[list[str]]:
    """The queues of each worker on the broker that answers, each worker's sorted."""
    from celery import current_app

    active = current_app.control.inspect(timeout=2).active_queues() or {}
    return [sorted(q["name"] for q in queues) for queues in active.values()]


def gone(processes: list[psutil.Process]) -> bool:
    return not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in processes)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_demo_stops_its_workers_and_web_server(
    service_env, tiny_model, coldstart_model, tools_model, tmp_path, signum
):
    demo, children = start_demo(service_env, tmp_path)
    tree = children + [c for p in children for c in p.children(recursive=True)]
    try:
        demo.send_signal(signum)
        demo.wait(timeout=30)
        wait_for(lambda: gone(tree), timeout=30, what="every process the demo started to exit")
    finally:
        stop_process(demo)
        for p in tree:
            if p.is_running():
                p.kill()


def test_killing_the_demo_stops_its_children_too(service_env, tiny_model, coldstart_model, tools_model, tmp_path):
    demo, children = start_demo(service_env, tmp_path)
    try:
        demo.kill()  # no handler runs: the children learn it from the kernel (PR_SET_PDEATHSIG)
        demo.wait(timeout=10)
        wait_for(lambda: gone(children), timeout=30, what="the demo's children to exit")
    finally:
        for p in children + [c for p in children if p.is_running() for c in p.children(recursive=True)]:
            if p.is_running():
                p.kill()
