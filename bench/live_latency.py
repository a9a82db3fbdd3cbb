"""How long from an event the training side writes to its arrival in an open page, with 50 pages open?

    python -m bench.live_latency [--clients 50] [--steps 40] [--interval 0.5]

The real path, each part in its own process as in production: a writer appends "rollouts" and "metrics" events to
the run's event log (runs.protocol.events.EventWriter, as the training program does); a supervisor loop
(``workers.supervisor.ingest_and_push`` every ``POLL_SECONDS``) ingests them and publishes to the run's Redis
channel; the ASGI web server (uvicorn, one process) relays each push as a server-sent event (``/runs/<id>/events``)
to ``--clients`` logged-in connections, read here with asyncio. A step's latency, per client, is the time from the
write of its rollouts to the arrival of the first message naming that step.

It runs on a data folder of its own (SQLite, the embedded Redis), unless DATABASE_URL / REDIS_URL say otherwise.
The last line is ``live_p95_ms=<p95 over every (client, step)>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def supervise_loop(run_id: int, until: float) -> None:
    """The supervisor's watch loop without the training process: ingest and push until ``until`` (epoch seconds)."""
    import django

    django.setup()
    from runs.models import Run
    from workers.supervisor import POLL_SECONDS, ingest_and_push

    run = Run.objects.get(pk=run_id)
    while time.time() < until:
        ingest_and_push(run)
        time.sleep(POLL_SECONDS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def client(port: int, path: str, cookie: str, arrivals: dict, ready: asyncio.Event, counter: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
                 .encode())
    await writer.drain()
    opened = False
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            text = line.decode().rstrip("\r\n")
            if text == "event: open" and not opened:
                opened = True
                counter[0] += 1
                if counter[0] == counter[1]:
                    ready.set()
            # chunked transfer: payload lines come through as they are; only "data: {...}" lines matter
            if text.startswith("data: {"):
                now = time.time()
                payload = json.loads(text[6:])
                for step in payload.get("steps", []):
                    arrivals.setdefault(step, []).append(now)
    except asyncio.CancelledError:
        writer.close()
        raise


def rows(step: int, n: int = 64) -> list[dict]:
    return [{"index": i, "group": i // 8, "prompt": f"What is {step} + {i // 8}?",
             "completion": f"<think>Wait, let me check: {step} + {i // 8} = {step + i // 8}.</think> {step + i // 8}",
             "rewards": [1.0, 0.5], "reward": 1.5 if i % 2 else 1.0, "advantage": 0.5 if i % 2 else -0.5,
             "length": 20, "truncated": False, "columns": {"answer": str(step + i // 8)}} for i in range(n)]


async def run_bench(args, port: int, run_id: int, cookie: str, log_path: Path) -> list[float]:
    from runs.protocol.events import EventWriter

    arrivals: dict[int, list[float]] = {}
    ready = asyncio.Event()
    counter = [0, args.clients]
    tasks = [asyncio.create_task(client(port, f"/runs/{run_id}/events", cookie, arrivals, ready, counter))
             for _ in range(args.clients)]
    await asyncio.wait_for(ready.wait(), timeout=60)
    writer = EventWriter(log_path)
    written: dict[int, float] = {}
    for step in range(1, args.steps + 1):
        written[step] = time.time()
        writer.write("rollouts", step=step, num_generations=8, reward_names=["a", "b"], rows=rows(step))
        writer.write("metrics", step=step, metrics={"reward": 1.25, "loss": 0.0})
        await asyncio.sleep(args.interval)
    deadline = time.time() + 10
    while time.time() < deadline and any(len(arrivals.get(s, [])) < args.clients for s in written):
        await asyncio.sleep(0.1)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    writer.close()
    missing = sum(args.clients - len(arrivals.get(s, [])) for s in written)
    if missing:
        print(f"{missing} (client, step) arrivals missing", flush=True)
    return [(t - written[s]) * 1000 for s in written for t in arrivals.get(s, [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between two steps written")
    parser.add_argument("--supervise", type=int, help=argparse.SUPPRESS)  # a child process: the supervisor loop
    parser.add_argument("--until", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.supervise:
        supervise_loop(args.supervise, args.until)
        return 0

    data = Path(tempfile.mkdtemp(prefix="bench-live-"))
    env = {**os.environ, "GRPO_DATA_DIR": str(data), "DJANGO_SETTINGS_MODULE": "grpo_web.settings",
           "PYTHONUNBUFFERED": "1"}
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command

    from grpo_web.embedded import ensure_configured_redis
    from runs.models import Dataset, DatasetVersion, Run
    from runs.paths import event_log_path

    call_command("migrate", verbosity=0)
    ensure_configured_redis()
    user = get_user_model().objects.create(username="bench")
    dataset = Dataset.objects.create(owner=user, name="bench")
    version = DatasetVersion.objects.create(dataset=dataset, number=1, path="", row_count=0)
    run = Run.objects.create(owner=user, name="live bench", model="tiny", dataset_version=version,
                             rewards=[{"name": "a", "weight": 1.0}, {"name": "b", "weight": 1.0}],
                             config={"num_generations": 8}, status=Run.Status.RUNNING, total_steps=args.steps)
    session = SessionStore()
    session[SESSION_KEY], session[BACKEND_SESSION_KEY] = str(user.pk), "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    cookie = f"{settings.SESSION_COOKIE_NAME}={session.session_key}"
    log_path = event_log_path(run)
    log_path.parent.mkdir(parents=True, exist_ok=True)

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "uvicorn", "grpo_web.asgi:application", "--host", "127.0.0.1",
                               "--port", str(port), "--log-level", "warning"], cwd=ROOT, env=env,
                              start_new_session=True)
    until = time.time() + 60 + args.steps * args.interval
    supervisor = subprocess.Popen([sys.executable, "-m", "bench.live_latency", "--supervise", str(run.pk),
                                   "--until", str(until)], cwd=ROOT, env=env, start_new_session=True)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        latencies = asyncio.run(run_bench(args, port, run.pk, cookie, log_path))
    finally:
        for proc in (supervisor, server):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
        if settings.REDIS_EMBEDDED and (data / "redis.pid").exists():
            os.kill(int((data / "redis.pid").read_text()), signal.SIGTERM)
        shutil.rmtree(data, ignore_errors=True)

    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    print(f"{args.clients} clients, {args.steps} steps written every {args.interval} s: {len(latencies)} arrivals; "
          f"latency p50 {statistics.median(latencies):.0f} ms, p95 {p95:.0f} ms, max {ordered[-1]:.0f} ms "
          f"(the supervisor polls the log every 250 ms); on {os.cpu_count()} CPUs")
    print(f"live_p95_ms={p95:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
