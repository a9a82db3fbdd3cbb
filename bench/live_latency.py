"""How long from an event the training side writes to its arrival in an open page, with 50 pages open?

    python -m bench.live_latency [--clients 50] [--steps 40] [--interval 0.5]

The real path, each part in its own process as in production: a writer appends "rollouts" and "metrics" events to
the run's event log (grpo_web_protocol.events.EventWriter, as the training program does); a supervisor loop
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
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.registry import parse_args
from bench.webapp import ROOT, django_on_a_data_folder, p95, signed_in, stop, web_server


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


async def client(port: int, path: str, cookie: str, arrivals: dict, ready: asyncio.Event, counter: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
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
    return [
        {
            "index": i,
            "group": i // 8,
            "prompt": f"What is {step} + {i // 8}?",
            "completion": f"<think>Wait, let me check: {step} + {i // 8} = {step + i // 8}.</think> {step + i // 8}",
            "rewards": [1.0, 0.5],
            "reward": 1.5 if i % 2 else 1.0,
            "advantage": 0.5 if i % 2 else -0.5,
            "length": 20,
            "truncated": False,
            "columns": {"answer": str(step + i // 8)},
        }
        for i in range(n)
    ]


async def run_bench(args, port: int, run_id: int, cookie: str, log_path: Path) -> list[float]:
    from grpo_web_protocol.events import EventWriter

    arrivals: dict[int, list[float]] = {}
    ready = asyncio.Event()
    counter = [0, args.clients]
    tasks = [
        asyncio.create_task(client(port, f"/runs/{run_id}/events", cookie, arrivals, ready, counter))
        for _ in range(args.clients)
    ]
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
    args = parse_args(parser, argv, clients=5, steps=5, interval=0.2)
    if args.supervise:
        supervise_loop(args.supervise, args.until)
        return 0

    with django_on_a_data_folder("bench-live-") as env:
        from runs.models import Dataset, DatasetVersion, Run
        from runs.paths import event_log_path

        user, cookie = signed_in("bench")
        dataset = Dataset.objects.create(owner=user, name="bench")
        version = DatasetVersion.objects.create(dataset=dataset, number=1, path="", row_count=0)
        run = Run.objects.create(
            owner=user,
            name="live bench",
            model="tiny",
            dataset_version=version,
            rewards=[{"name": "a", "weight": 1.0}, {"name": "b", "weight": 1.0}],
            config={"num_generations": 8},
            status=Run.Status.RUNNING,
            total_steps=args.steps,
        )
        log_path = event_log_path(run)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with web_server(env) as (_, port):
            until = time.time() + 60 + args.steps * args.interval
            supervisor = subprocess.Popen(
                [sys.executable, "-m", "bench.live_latency", "--supervise", str(run.pk), "--until", str(until)],
                cwd=ROOT,
                env=env,
                start_new_session=True,
            )
            try:
                latencies = asyncio.run(run_bench(args, port, run.pk, cookie, log_path))
            finally:
                stop(supervisor)

    print(
        f"{args.clients} clients, {args.steps} steps written every {args.interval} s: {len(latencies)} arrivals; "
        f"latency p50 {statistics.median(latencies):.0f} ms, p95 {p95(latencies):.0f} ms, max {max(latencies):.0f} "
        f"ms (the supervisor polls the log every 250 ms); on {os.cpu_count()} CPUs"
    )
    print(f"live_p95_ms={p95(latencies):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
