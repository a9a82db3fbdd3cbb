"""How long does Start take to answer, and how long did it wait before (issue 44, item 3)?

    python -m bench.start_latency [--runs 20]

A live web server (uvicorn) takes ``--runs`` POST /api/runs of a run YAML whose reward is the user's own code, one
after another, as a script or the form would; the run is stored as "checking" and answered at once. A worker of the
checks queue (one Celery process, as the demo's) is then started and checks each in the sandbox, calling the reward on a
few rows and building TRL's GRPOConfig: the time each run spent checking (from its answer to queued) is what a Start
used to wait for before answering.

Side by side in one run: ``start_answer_p95_ms`` (goal <= 300) against ``check_p50_s``, the check it no longer waits for.
It runs on a data folder of its own (SQLite, the embedded Redis), unless DATABASE_URL / REDIS_URL say otherwise.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import statistics
import subprocess
import sys
import time

from bench.registry import parse_args
from bench.webapp import ROOT, django_on_a_data_folder, p95, stop, web_server

YAML = (
    "name: bench {n}\nmodel_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [digit_ratio]\n"
    "num_generations: 4\nper_device_train_batch_size: 8\nmax_steps: 2\n"
)


def post_run(port: int, token: str, n: int) -> tuple[float, dict]:
    """POST /api/runs; (seconds to the answer, the answer)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"yaml": YAML.format(n=n), "queue_anyway": True})
    began = time.perf_counter()
    connection.request(
        "POST", "/api/runs", body, {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    )
    response = connection.getresponse()
    answer = json.loads(response.read())
    took = time.perf_counter() - began
    connection.close()
    if response.status != 201:
        raise SystemExit(f"POST /api/runs answered {response.status}: {answer}")
    return took, answer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parse_args(parser, argv, runs=2)

    with django_on_a_data_folder("grpo-bench-start-") as env:
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from grpo_web_protocol.demo_data import arithmetic_rows

        from grpo_web import queues
        from runs.accounts.services import token_create
        from runs.datasets.services import dataset_import
        from runs.models import Run
        from workers.processes import celery_worker_command

        call_command("build_tiny_model", verbosity=0)  # the model the runs name: checked to exist when they start
        user = get_user_model().objects.create_user(username="bench", password="bench-pass")
        data = "".join(json.dumps(r) + "\n" for r in arithmetic_rows(64)).encode()
        dataset_import(owner=user, name="arithmetic", stream=io.BytesIO(data), source_name="arithmetic.jsonl")
        _, token = token_create(owner=user, name="bench", scope="write")
        with web_server(env) as (_, port):
            post_run(port, token, 0)  # the first request loads the app's modules: not counted
            answers, started = [], {}
            for n in range(1, args.runs + 1):
                took, answer = post_run(port, token, n)
                if answer["status"] != "checking":
                    raise SystemExit(f"run {answer['id']} answered {answer['status']}, not checking")
                answers.append(took)
                started[answer["id"]] = time.time()
            print(f"start_answer_p50_ms={statistics.median(answers) * 1000:.1f}", flush=True)

            worker = subprocess.Popen(
                celery_worker_command([queues.CHECKS_QUEUE], "bench-checks@%h", loglevel="WARNING"),
                cwd=ROOT,
                env=env,
                start_new_session=True,
            )
            try:
                checked: dict[int, float] = {}
                deadline = time.time() + 120 + 60 * args.runs
                # the runs are checked one after another: each one's check is the time since the one before it ended
                # (the first: since the worker was started, its start-up included, as a Start would have waited)
                previous = time.time()
                while len(checked) < len(started) + 1 and time.time() < deadline:
                    for pk, status in Run.objects.filter(pk__in=started).values_list("pk", "status"):
                        if pk not in checked and status != Run.Status.CHECKING:
                            if status != Run.Status.QUEUED:
                                raise SystemExit(f"run {pk} was {status}: {Run.objects.get(pk=pk).error}")
                            now = time.time()
                            checked[pk], previous = now - previous, now
                    if len(checked) == len(started):
                        break
                    time.sleep(0.05)
            finally:
                stop(worker)
            if len(checked) < len(started):
                raise SystemExit(f"{len(started) - len(checked)} runs were never checked")
    durations = list(checked.values())[1:] or list(checked.values())  # the first includes the worker's start
    print(f"checks={len(checked)} check_max_s={max(durations):.2f}")
    print(f"start_answer_p95_ms={p95([a * 1000 for a in answers]):.1f} check_p50_s={statistics.median(durations):.2f}")


if __name__ == "__main__":
    sys.exit(main())
