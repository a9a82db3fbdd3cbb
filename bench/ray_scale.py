"""Ray's cost and scaling on the training program, each Ray run side by side with local processes, in one run.

    python -m bench.ray_scale [--steps 6] [--global-batch 256] [--completion-length 32] [--hidden 64] [--layers 2]
                              [--address http://...:8265]

Every run trains the tiny model with the same program (workers.training.train, or workers.training.ray_train in Ray
Train workers, DDP over gloo) on the same rows, completions of up to 32 tokens, and counts completions per second
between the first and the last step's events (start-up excluded):

- ``ray_overhead_ratio``: 1 Ray worker of 1 thread against 1 local process of 1 thread on the same batch (half the
  global batch): what Ray itself costs (goal >= 0.95).
- ``ray_weak_scaling``: 2 Ray workers of 1 thread each, each on that same half batch, against that 1 local process of
  1 thread: the engine's weak scaling, independent of how one process spreads over 2 cores (goal >= 1.8).
- ``ray_scale_ratio`` (kept for reference): 2 Ray workers of 1 thread each against 1 local process of 2 threads on
  the same global batch; on a 2-core machine this measures the machine as much as the engine.

Besides the ratios it prints each phase's median (TRL's generation, the update) for the 2-thread process and Ray's
rank 0, and the submit-to-first-step latency of the 2-worker job (Jobs API submit to its first step's event). Without
--address the script starts a local Ray head (2 CPUs) and stops it at the end. Last line:
``ray_overhead_ratio=<x> ray_weak_scaling=<y>``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workers.processes import wait_until_answers

ROOT = Path(__file__).resolve().parent.parent


def config(folder: Path, model: Path, data: Path, steps: int, per_device: int, length: int) -> Path:
    from workers.training.protocol.config import GRPOFields, RewardSpec, TrainConfig

    cfg = TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(folder / "out"),
        event_log=str(folder / "events.jsonl"),
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        grpo=GRPOFields(
            num_generations=8,
            per_device_train_batch_size=per_device,
            max_steps=steps,
            max_completion_length=length,
            seed=3,
            save_steps=0,
            gradient_checkpointing=False,
        ),
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(cfg.to_json())
    return path


def throughput(event_log: Path) -> tuple[float, float, float]:
    """(completions per second between the first and the last step, time of the first step's event, the median
    seconds between two steps)."""
    from workers.training.protocol.events import read_events

    events, _ = read_events(event_log)
    batches = [e for e in events if e["type"] == "rollouts"]
    first_seen: dict[int, float] = {}
    for e in events:
        if e["type"] == "metrics" and "step" in e:
            first_seen.setdefault(e["step"], e["ts"])
    steps = sorted(first_seen.values())
    completions = sum(len(b.get("rows") or b.get("rollouts") or []) for b in batches[1:])
    first, last = steps[0], steps[-1]
    return completions / (last - first), first, statistics.median(b - a for a, b in zip(steps, steps[1:]))


def phases(event_log: Path) -> dict[str, float]:
    """Median seconds of TRL's generation and of the update, per step after the first (rank 0's on Ray)."""
    from workers.training.protocol.events import read_events

    events, _ = read_events(event_log)
    timed = [e["metrics"] for e in events if e["type"] == "metrics" and "timing/step_s" in e.get("metrics", {})][1:]
    return {k: statistics.median(m[f"timing/{k}_s"] for m in timed) for k in ("generation", "update")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_head() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            "--block",
            "--port",
            "6391",
            "--num-cpus",
            "2",
            "--num-gpus",
            "0",
            "--include-dashboard",
            "true",
            "--dashboard-host",
            "127.0.0.1",
            "--dashboard-port",
            str(port),
            "--ray-client-server-port",
            str(free_port()),
            "--dashboard-agent-listen-port",
            str(free_port()),
            "--disable-usage-stats",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"http://127.0.0.1:{port}"
    try:
        wait_until_answers(proc, address + "/api/version", 120, what="the Ray head (ray start)")
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    return proc, address


def stop_session(sid: int) -> None:
    import psutil

    procs = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                procs.append(p)
        except (OSError, psutil.Error):
            continue
    for p in procs:
        p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=10)
    for p in alive:
        p.kill()


def run_local(work: Path, name: str, model: Path, data: Path, args, threads: int, per_device: int) -> Path:
    """One local process of the training program with ``threads`` torch threads; returns its event log."""
    cfg = config(work / name, model, data, args.steps, per_device, args.completion_length)
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, torch; torch.set_num_threads({threads}); from workers.training.train import "
            "main; sys.exit(main([sys.argv[1]]))",
            str(cfg),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"},
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return cfg.parent / "events.jsonl"


def run_ray(client, work: Path, name: str, model: Path, data: Path, args, workers: int, per_device: int):
    """One Ray job of ``workers`` Ray Train workers (1 thread each); returns (event log, submit time)."""
    cfg = config(work / name, model, data, args.steps, per_device, args.completion_length)
    submitted = time.time()
    job = client.submit_job(
        entrypoint=f"{sys.executable} -m workers.training.ray_train {cfg} --num-workers {workers} --threads 1",
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}},
    )
    while client.get_job_status(job).value not in ("SUCCEEDED", "FAILED", "STOPPED"):
        time.sleep(1)
    if client.get_job_status(job).value != "SUCCEEDED":
        raise SystemExit(client.get_job_logs(job)[-3000:])
    return cfg.parent / "events.jsonl", submitted


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--global-batch", type=int, default=256, help="completions a step (8 per prompt)")
    parser.add_argument("--completion-length", type=int, default=32, help="max_completion_length")
    parser.add_argument("--hidden", type=int, default=64, help="the random-initialised model's hidden size")
    parser.add_argument("--layers", type=int, default=2, help="its layers")
    parser.add_argument("--address", help="a running cluster's dashboard (else a local head is started)")
    args = parser.parse_args()
    # a `timeout` or Ctrl-C still stops the Ray head this script started (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.path.insert(0, str(ROOT))
    from workers.training.demo_data import arithmetic_rows
    from workers.training.tinymodel import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="ray-scale-"))
    model, data = work / "model", work / "data.jsonl"
    build_tiny_model(model, hidden_size=args.hidden, layers=args.layers)
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(256)))
    half = args.global_batch // 2

    # Three local baselines: the machine's whole (2 threads, the global batch), one thread on half the batch (what
    # one Ray worker gets), and one thread on the global batch (the weak-scaling reference: a worker's batch
    # stays that of one process, so 2 workers do twice the work a step).
    local2 = run_local(work, "local-2t", model, data, args, threads=2, per_device=args.global_batch)
    local1 = run_local(work, "local-1t", model, data, args, threads=1, per_device=half)
    rates = {"local-2t": throughput(local2)[0], "local-1t": throughput(local1)[0]}
    print(f"local: 1 process, 2 threads, batch {args.global_batch}: {rates['local-2t']:.1f} completions/s")
    print(f"local: 1 process, 1 thread, batch {half}: {rates['local-1t']:.1f} completions/s")

    head, address = (None, args.address) if args.address else start_head()
    try:
        from ray.job_submission import JobSubmissionClient

        client = JobSubmissionClient(address)
        ray1, _ = run_ray(client, work, "ray-1w", model, data, args, workers=1, per_device=half)
        ray2, submitted = run_ray(client, work, "ray-2w", model, data, args, workers=2, per_device=half)
        rates["ray-1w"] = throughput(ray1)[0]
        rates["ray-2w"], first_step, _ = throughput(ray2)
    finally:
        if head is not None:
            stop_session(head.pid)
    print(f"ray: 1 Ray Train worker, 1 thread, batch {half}: {rates['ray-1w']:.1f} completions/s")
    print(f"ray: 2 Ray Train workers, 1 thread each, batch {half} each: {rates['ray-2w']:.1f} completions/s")
    local_phases, ray_phases = phases(local2), phases(ray2)
    for phase in ("generation", "update"):
        print(
            f"{phase}: local 2 threads {local_phases[phase]:.3f} s, ray rank 0 {ray_phases[phase]:.3f} s "
            f"(x{local_phases[phase] / ray_phases[phase]:.2f})"
        )
    print(f"submit_to_first_step_s={first_step - submitted:.1f}")
    # ray_scale_ratio: 2 workers against the whole machine in one process, the same global batch (kept for reference:
    # on 2 cores it measures the machine as much as the engine).
    print(f"ray_scale_ratio={rates['ray-2w'] / rates['local-2t']:.2f}")
    print(
        f"ray_overhead_ratio={rates['ray-1w'] / rates['local-1t']:.3f} "
        f"ray_weak_scaling={rates['ray-2w'] / rates['local-1t']:.2f}"
    )


if __name__ == "__main__":
    main()
