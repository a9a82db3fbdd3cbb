"""In chromium: the run page's badge and status line keep up with a run whose supervisor stops reporting. A paused
(or busy) supervisor's step is shown with its age; once its process is gone the badge says "worker lost, checking"
within a poll, without a reload; once a live worker's reaper has failed the run, the badge says failed."""

import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.lifecycle.services import run_reap_stale
from runs.models import Run
from tests.browser_checks import check, watch
from tests.conftest import log_in
from tests.lifecycle.test_run_reaper import HOLD

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_the_badge_says_a_stale_step_and_a_lost_worker_without_a_reload(web_server, owner, dataset_version, page):
    run = Run.objects.create(
        owner=owner,
        name="quiet",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config={},
        total_steps=100,
        step=7,
        status=Run.Status.RUNNING,
        worker_name="w1@host",
        started_at=timezone.now() - timedelta(seconds=60),
        heartbeat_at=timezone.now() - timedelta(seconds=5),  # past three missed beats, short of "not responding"
    )
    run.run_dir.mkdir(parents=True, exist_ok=True)
    # a real process holds the supervisor's lock, as a paused supervisor does
    supervisor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLD + "; print('held', flush=True); time.sleep(600)",
            run.run_dir / "supervisor-1.lock",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert supervisor.stdout.readline() == b"held\n"
        findings = watch(page)
        log_in(page, web_server)

        def hold_heartbeat(age_s: float, shown, seen: str) -> None:
            """Keep the run's heartbeat ``age_s`` old (whatever the machine's load made of the time so far) until
            ``shown()`` holds, through the page's 2 s poll, no reload."""
            deadline = time.monotonic() + 15
            while True:
                Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=age_s))
                if shown():
                    return
                assert time.monotonic() < deadline, page.text_content(seen)
                page.wait_for_timeout(250)

        Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=5))
        page.goto(f"{web_server}/runs/{run.pk}/")
        # inside the window: past three missed beats, short of "not responding"
        hold_heartbeat(5, lambda: "no word from the worker w1@host since" in (page.text_content("#run-speed") or ""),
                       "#run-speed")  # fmt: skip
        assert "step 7 as of" in page.text_content("#run-speed")
        assert page.text_content("#run-status") == "running"
        assert "stalled" in page.get_attribute("#run-status", "class")

        supervisor.kill()  # the worker is killed: its supervisor's lock is let go
        supervisor.wait()
        # A live worker of this test session (another module's) would reap the run within a beat of its lock going
        # free, as it should; its beat is kept fresh here so the page's "lost, checking" is seen before that.
        hold_heartbeat(0, lambda: page.query_selector("#run-status:text('worker lost, checking')"), "#run-status")
        Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=5))
        assert "is lost" in page.text_content("#run-speed")

        run_reap_stale(timeout=60)  # this reaper, or a live worker's just before it
        run.refresh_from_db()
        assert run.status == Run.Status.FAILED, run.status
        page.wait_for_selector("#run-status:text-is('failed')", timeout=15_000)
        assert not (problems := check(page, findings)), "\n".join(problems)
    finally:
        supervisor.kill()
        supervisor.wait()
