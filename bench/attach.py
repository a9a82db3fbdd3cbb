"""What does the attach client cost a training script, and how fast does a live server take what it sends?

    python -m bench.attach [--steps 20] [--rounds 3] [--warmup 2] [--rows 200000]
                           [--database-url postgres://postgres@127.0.0.1:5432/grpo_bench_attach | --sqlite]

One uvicorn process serves the app on a database of its own (created here and dropped at the end; ``--sqlite``: a
throwaway SQLite file instead) and the embedded Redis, as in production. Then:

- overhead: the plain TRL GRPO script of the attach tests (tests/attach/grpo_script.py's shape: the tiny local model,
  two reward functions, G=4, metrics logged every step) trains ``--steps`` steps as it is and with ``grpo_web_attach.attach``
  sending to the server, alternating over ``--rounds`` so drift of the machine hits both alike. A step is timed from
  one ``on_step_begin`` to the next; the first ``--warmup`` steps and the last go. The server runs on the same
  machine here, standing in for one elsewhere: it is reniced (10) for this part, so its ingest yields to training.
  The time the training thread spends in the client's code (capture, callbacks) is printed too: on a busy machine
  it is the steadier figure.
- throughput: a spool of ``--rows`` synthetic completions (bench.synthetic: R1-style transcripts, three reward
  functions, G=8, 1024 rows a "rollouts" event) written as the client's SpoolWriter writes it, then sent by the
  client's own sender thread (gzip'd batches at their offsets) to an attached run; timed from its start until the
  server has taken the whole spool, and checked against the rows stored.

The last line is ``attach_overhead_ratio=<attached median step / plain median step>
attach_rows_per_s=<rows stored / seconds>``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import pgdb
from bench.registry import parse_args
from bench.webapp import django_on_a_data_folder, web_server

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/grpo_bench_attach"


def digit_ratio(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def contains_answer(completions, answer, **kwargs):
    return [float(a in c) for c, a in zip(completions, answer)]


CLIENT_SECONDS = [0.0]  # the attached runs' time in the client's code on the training thread


def timed(fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            CLIENT_SECONDS[0] += time.perf_counter() - start

    return wrapper


def time_the_client() -> None:
    """Count the time the training thread spends in the client: the capture of each batch and the callbacks."""
    import grpo_web_attach.client

    grpo_web_attach.client.capture_batch = timed(grpo_web_attach.client.capture_batch)
    for name in ("on_log", "on_save", "on_train_begin"):
        setattr(grpo_web_attach.AttachCallback, name, timed(getattr(grpo_web_attach.AttachCallback, name)))


def train(model: Path, out: Path, steps: int, url: str = "", token: str = "") -> list[float]:
    """Begin-to-begin step times of the attach tests' script, attached when ``url`` is given."""
    import grpo_web_attach.client
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from bench.capture_overhead import step_timer

    timer = step_timer()
    rows = [{"prompt": f"What is {a} + {a + 1}?", "answer": str(2 * a + 1)} for a in range(64)]
    args = GRPOConfig(
        output_dir=str(out),
        num_generations=4,
        per_device_train_batch_size=8,
        max_steps=steps,
        max_completion_length=12,
        learning_rate=1e-2,
        seed=11,
        logging_steps=1,
        disable_tqdm=True,
        save_strategy="no",
        report_to="none",
        gradient_checkpointing=False,
        use_cpu=True,
    )
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=[digit_ratio, contains_answer],
        args=args,
        train_dataset=Dataset.from_list(rows),
        callbacks=[timer],
    )
    if url:
        grpo_web_attach.attach(trainer, url=url, token=token, name=out.name)
    trainer.train()
    return timer.durations


def overhead(model: Path, work: Path, url: str, token: str, args) -> float:
    time_the_client()
    times: dict[str, list[float]] = {"plain": [], "attached": []}
    for i in range(args.rounds):
        for variant in ("plain", "attached") if i % 2 == 0 else ("attached", "plain"):
            out = work / f"{variant}-{i}"
            steps = train(model, out, args.steps, *((url, token) if variant == "attached" else ()))[args.warmup :]
            times[variant] += steps
            print(f"round {i + 1} {variant:9s} median step {statistics.median(steps) * 1000:7.1f} ms", flush=True)
    plain, attached = statistics.median(times["plain"]), statistics.median(times["attached"])
    client = CLIENT_SECONDS[0] / (args.rounds * args.steps)
    print(
        f"median step: plain {plain * 1000:.1f} ms, attached {attached * 1000:.1f} ms; the client's code on the "
        f"training thread: {client * 1000:.2f} ms a step ({client / plain:.1%} of a plain step)",
        flush=True,
    )
    return attached / plain


def throughput(work: Path, url: str, token: str, rows: int) -> float:
    from grpo_web_attach.capture import event_line
    from grpo_web_attach.sender import Api, Sender

    from bench.synthetic import REWARD_NAMES, rollout_events
    from runs.models import Rollout, Run

    spool, n = work / "spool" / "events.jsonl", 0
    spool.parent.mkdir(parents=True)
    with open(spool, "wb") as fh:
        for event in rollout_events(rows):
            n += len(event.get("rows", ()))
            fh.write(event_line(event.pop("type"), **{k: v for k, v in event.items() if k != "ts"}))
    print(f"spool: {n} completions, {spool.stat().st_size / 1e6:.0f} MB", flush=True)
    api = Api(url, token, timeout=300)
    status, answer = api.json("POST", "/runs", {"name": "throughput", "reward_names": REWARD_NAMES})
    assert status == 200, (status, answer)
    sender = Sender(api, answer["id"], answer["resume_key"], spool, work / "spool" / "acked", log=print)
    start = time.perf_counter()
    sender.start()
    sent = sender.flush(timeout=3600)
    seconds = time.perf_counter() - start
    sender.stop()
    assert sent and not sender.error, sender.error
    stored = Rollout.objects.filter(run_id=answer["id"]).count()
    assert stored == n, (stored, n)
    run = Run.objects.get(pk=answer["id"])
    print(f"throughput: {n} rows in {seconds:.1f} s ({n / seconds:,.0f} rows/s), run step {run.step}", flush=True)
    return n / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps a run")
    parser.add_argument("--rounds", type=int, default=3, help="plain/attached pairs")
    parser.add_argument("--warmup", type=int, default=2, help="steps dropped at the start of each run")
    parser.add_argument("--rows", type=int, default=200_000, help="completions in the throughput spool")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--database-url", default=os.environ.get("BENCH_ATTACH_DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--sqlite", action="store_true", help="a throwaway SQLite database instead of PostgreSQL")
    args = parse_args(parser, argv, steps=4, rounds=1, warmup=1, rows=4096)
    if args.steps < args.warmup + 2:
        parser.error("--steps: at least --warmup + 2 (the last step has no next begin)")

    started = time.perf_counter()
    if args.sqlite:
        os.environ.pop("DATABASE_URL", None)
    else:
        os.environ["DATABASE_URL"] = args.database_url
        pgdb.create(args.database_url)
    try:
        with django_on_a_data_folder("bench-attach-") as env, web_server(env) as (server, port):
            import torch
            from django.contrib.auth import get_user_model

            from runs.accounts.services import token_create
            from workers.training.tinymodel import build_tiny_model

            torch.set_num_threads(args.threads)
            user = get_user_model().objects.create(username="bench")
            _, token = token_create(owner=user, name="bench", scope="attach")
            url = f"http://127.0.0.1:{port}"
            work = Path(tempfile.mkdtemp(prefix="bench-attach-work-"))
            try:
                rows_per_s = throughput(work, url, token, args.rows)
                # the server stands in for one on another machine: its ingest of the attached runs' batches yields
                # to the training (the client's own cost stays in the training process)
                os.setpriority(os.PRIO_PGRP, server.pid, 10)
                model = build_tiny_model(work / "model")
                ratio = overhead(model, work, url, token, args)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        if not args.sqlite:
            pgdb.drop(args.database_url)
    database = "SQLite" if args.sqlite else "PostgreSQL"
    print(
        f"{args.rounds} rounds x {args.steps} steps (warmup {args.warmup}), {args.rows} rows; {database}, "
        f"{os.cpu_count()} CPUs, torch threads={args.threads}, total {time.perf_counter() - started:.0f} s"
    )
    print(f"attach_overhead_ratio={ratio:.3f} attach_rows_per_s={rows_per_s:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
