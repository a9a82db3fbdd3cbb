"""What does capture cost? The same seeded GRPO run, plain TRL vs. our instrumented trainer, step time compared.

    python -m bench.capture_overhead [--rounds 6] [--steps 40] [--warmup 2] [--threads 1]   (from the repo root)

The variants are built by ``workers.training.train.make_trainer`` from one config, so they differ only in what capture adds:
``CapturingGRPOTrainer`` (rollouts written once per generation batch, and the token-level values of the default
sample of groups, ``token_sample_groups``, a shard per step) and ``MetricsCallback`` (metrics every step); the third,
"all_tokens", keeps the token-level values of every group. Runs alternate plain / instrumented / all_tokens so slow
drift of the machine (thermal, other processes) hits them alike.

A step is timed from one ``on_step_begin`` to the next. ``on_step_end`` would be too early: the Trainer logs after it,
and ``MetricsCallback.on_log`` runs there, so an end-of-step timer would miss part of the cost being measured.
The last step of each run has no next begin and is dropped; the first ``--warmup`` steps are dropped too (lazy
initialisation, allocator growth).

The last two lines are ``capture_overhead_ratio=<instrumented median / plain median>`` and
``token_capture_overhead_ratio=<all_tokens median / plain median>``, for scripts to grep.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file (python bench/capture_overhead.py): make `workers` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry import parse_args  # noqa: E402 (after the path is set)

VARIANTS = ("plain", "instrumented", "all_tokens")


def step_timer():
    """A TrainerCallback collecting begin-to-begin step durations (seconds) in ``.durations``."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.durations: list[float] = []
            self._last_begin: float | None = None

        def on_step_begin(self, args, state, control, **kwargs):
            now = time.perf_counter()
            if self._last_begin is not None:
                self.durations.append(now - self._last_begin)
            self._last_begin = now

    return StepTimer()


def make_config(model_dir: Path, data_path: Path, work: Path, steps: int, seed: int, variant: str = "instrumented"):
    from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig

    sample = {"token_sample_groups": -1} if variant == "all_tokens" else {}  # else the default sample
    return TrainConfig(
        model=str(model_dir),
        dataset_path=str(data_path),
        output_dir=str(work / "out"),
        event_log=str(work / "events.jsonl"),
        rewards=[
            RewardSpec("digits", 0.5, builtin="digit_ratio"),
            RewardSpec("format", 1.0, builtin="think_format"),
            RewardSpec("correct", 2.0, builtin="accuracy"),
        ],
        grpo=GRPOFields(max_steps=steps, seed=seed),
        tokens_dir=str(work / "tokens"),
        **sample,
    )


@dataclass
class RunResult:
    durations: list[float]  # begin-to-begin step times, seconds
    trajectory: list[tuple]  # (loss, grad_norm, reward, entropy) per step
    rollout_rows: int = 0  # rows in the run's event log; 0 for plain
    token_rows: int = 0  # completions in the run's token shards; 0 for plain
    capture_s: float = 0.0  # wall time spent inside the capture code itself
    token_s: float = 0.0  # of which in the token capture on the training thread: copying TRL's tensors, decoding
    writer_s: float = 0.0  # the token shard writer thread's work (building and writing shards), beside training


def run_once(variant: str, config) -> RunResult:
    from grpo_web_protocol.events import EventWriter, read_events
    from transformers import PrinterCallback

    from workers.training.capture import MetricsCallback
    from workers.training.train import make_trainer

    events = EventWriter(config.event_log) if variant != "plain" else None
    trainer = make_trainer(config, events)
    # disable_tqdm makes the Trainer print every log dict; removed from both variants alike to keep output readable.
    trainer.remove_callback(PrinterCallback)
    timer = step_timer()
    trainer.add_callback(timer)

    # Step-time medians on a shared CPU are noisy at the percent level; the time spent inside the capture code is
    # measured directly as well, as a low-noise cross-check of the ratio (it is microseconds of wrapper per call).
    spent = [0.0, 0.0, 0.0]

    def timed(fn, tokens=False):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0
                spent[1] += (time.perf_counter() - t0) if tokens else 0.0

        return wrapper

    import grpo_web_attach.tokens as token_module

    write = token_module.ShardWriter.write

    def timed_write(*args, **kwargs):  # the writer thread's work, a shard at a time: off the training thread, still CPU
        t0 = time.thread_time()  # its CPU time: wall time would count its waits for the GIL while training runs
        try:
            return write(*args, **kwargs)
        finally:
            spent[2] += time.thread_time() - t0

    if events:
        trainer._capture = timed(trainer._capture)
        tokens = trainer.token_capture
        if tokens is not None:  # holding TRL's frame (arm) costs microseconds, seen in the step times only
            tokens._keep, tokens.flush = timed(tokens._keep, True), timed(tokens.flush, True)
            token_module.ShardWriter.write = timed_write
        for callback in trainer.callback_handler.callbacks:
            if isinstance(callback, MetricsCallback):
                callback.on_log = timed(callback.on_log)

    try:
        trainer.train()
    finally:
        token_module.ShardWriter.write = write
        if events:
            events.close()
    result = RunResult(
        durations=timer.durations,
        # Sampled completions show in reward and entropy, the update in loss and grad_norm.
        trajectory=[
            tuple(entry.get(k) for k in ("loss", "grad_norm", "reward", "entropy"))
            for entry in trainer.state.log_history
            if "loss" in entry
        ],
        capture_s=spent[0],
        token_s=spent[1],
        writer_s=spent[2],
    )
    if events:
        import pyarrow.parquet as pq

        result.rollout_rows = sum(len(e["rows"]) for e in read_events(config.event_log)[0] if e["type"] == "rollouts")
        result.token_rows = sum(pq.read_metadata(p).num_rows for p in Path(config.tokens_dir).glob("step-*.parquet"))
    # Release this run's model and optimizer now, so their teardown is not billed to the next run's steps.
    del trainer
    gc.collect()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="plain/instrumented pairs to run (default 6)")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per run (default 40)")
    parser.add_argument("--warmup", type=int, default=2, help="leading steps per run left out (default 2)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: fewest scheduling effects, least noise)",
    )
    parser.add_argument("--seed", type=int, default=42)
    args = parse_args(parser, argv, rounds=1, steps=3, warmup=1)
    if args.steps < args.warmup + 2:
        parser.error("--steps must exceed --warmup by at least 2 (the last step of a run is not timed)")

    import torch
    from transformers.utils import logging as hf_logging

    # Fixed once for the whole process, so every run, of either variant, computes with the same thread pool.
    torch.set_num_threads(args.threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore")

    from grpo_web_protocol.demo_data import arithmetic_rows

    from workers.training.tinymodel import build_tiny_model

    durations = {v: [] for v in VARIANTS}
    per_round = {v: [] for v in VARIANTS}
    trajectories: dict[str, list[tuple]] = {}
    mismatched_rounds = 0
    rollout_rows = {v: 0 for v in VARIANTS}
    token_rows = {v: 0 for v in VARIANTS}
    capture_s = {v: 0.0 for v in VARIANTS}
    token_s = {v: 0.0 for v in VARIANTS}
    writer_s = {v: 0.0 for v in VARIANTS}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="capture-overhead-") as tmp:
        tmp = Path(tmp)
        model_dir = build_tiny_model(tmp / "model")
        data_path = tmp / "data.jsonl"
        data_path.write_text("".join(json.dumps(row) + "\n" for row in arithmetic_rows(200)))

        for r in range(args.rounds):
            for variant in VARIANTS:
                # Fresh output dir and event log per run: no run reads or appends to another's files.
                config = make_config(model_dir, data_path, tmp / f"r{r}-{variant}", args.steps, args.seed, variant)
                result = run_once(variant, config)
                kept = result.durations[args.warmup :]
                durations[variant].extend(kept)
                per_round[variant].append(statistics.median(kept))
                trajectories[variant] = result.trajectory
                rollout_rows[variant] += result.rollout_rows
                token_rows[variant] += result.token_rows
                capture_s[variant] += result.capture_s
                token_s[variant] += result.token_s
                writer_s[variant] += result.writer_s
                print(
                    f"round {r + 1}/{args.rounds} {variant:<12} median step {1000 * per_round[variant][-1]:7.2f} ms"
                    + (
                        f"  ({result.rollout_rows} rollout rows, tokens of {result.token_rows} completions captured)"
                        if result.rollout_rows
                        else ""
                    ),
                    flush=True,
                )
            # Same seed, same data: the variants must train identically, or the timings compare different work.
            mismatched_rounds += not trajectories["plain"] or any(
                trajectories["plain"] != trajectories[v] for v in VARIANTS[1:]
            )

    medians = {v: statistics.median(durations[v]) for v in VARIANTS}
    ratio = medians["instrumented"] / medians["plain"]
    token_ratio = medians["all_tokens"] / medians["plain"]

    print()
    print(
        f"{args.rounds} rounds x {args.steps} steps, first {args.warmup} steps of each run skipped, "
        f"torch threads={args.threads}, total {time.perf_counter() - started:.0f} s"
    )
    print(f"{'variant':<14}{'steps':>6}{'median ms':>11}{'mean ms':>9}{'min ms':>8}  round medians ms")
    for v in VARIANTS:
        d = durations[v]
        rounds = " ".join(f"{1000 * m:.1f}" for m in per_round[v])
        print(
            f"{v:<14}{len(d):>6}{1000 * medians[v]:>11.2f}{1000 * statistics.fmean(d):>9.2f}"
            f"{1000 * min(d):>8.2f}  {rounds}"
        )
    capture_ms = 1000 * capture_s["instrumented"] / (args.rounds * args.steps)
    print(f"rollout rows captured in the event logs: {rollout_rows['instrumented']}")
    print(
        f"completions with token-level values in the shards: {token_rows['instrumented']} with the default sample "
        f"(token_sample_groups=1), {token_rows['all_tokens']} with every group"
    )
    print(
        f"time inside capture code (_capture + MetricsCallback.on_log): {capture_ms:.3f} ms/step, "
        f"{100 * capture_ms / (1000 * medians['plain']):.2f}% of the plain median step"
    )
    for v in VARIANTS[1:]:
        ms = 1000 * token_s[v] / (args.rounds * args.steps)
        writer_ms = 1000 * writer_s[v] / (args.rounds * args.steps)
        print(
            f"{v}: of which token capture on the training thread (copying TRL's tensors, decoding new ids): "
            f"{ms:.3f} ms/step, {100 * ms / (1000 * medians['plain']):.2f}% of the plain median step; "
            f"shard writer thread: {writer_ms:.3f} ms/step of CPU beside it"
        )
    print(
        "identical training (loss, grad_norm, reward, entropy per step), plain vs instrumented vs all_tokens: "
        + ("yes, every round" if not mismatched_rounds else f"NO in {mismatched_rounds} round(s): not the same work")
    )
    print(f"capture_overhead_ratio={ratio:.3f}")
    print(f"token_capture_overhead_ratio={token_ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
