"""Completions per second of a 2-worker Ray run against one local process, for the same global batch.

    python -m bench.ray_scale [--steps 6] [--global-batch 256] [--completion-length 32] [--hidden 64] [--layers 2]
                              [--address http://...:8265]

Both train the tiny model with the same program (workers.training.train) on the same rows and global batch (256 completions of
up to 32 tokens a step by default): locally one process with 2 torch threads; on Ray two Ray Train workers (DDP over
gloo), 1 thread each, each generating and training on half the batch. Besides the ratio it prints each phase's median
(TRL's generation, the update) for both, since they scale differently: token-by-token generation is bound by per-step
overhead that one process cannot spread over 2 cores, while the update's large matmuls already use both threads. Throughput is measured between the first and the last step's events (start-up excluded);
submit-to-first-step latency is measured from the Jobs API submit to the first step's event. Without --address the
script starts a local Ray head (2 CPUs) and stops it at the end. Last line: ``ray_scale_ratio=<x>``.
"""

from __future__ import annotations

import argparse
import json
import os
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--global-batch", type=int, default=256, help="completions a step (8 per prompt)")
    parser.add_argument("--completion-length", type=int, default=32, help="max_completion_length")
    parser.add_argument("--hidden", type=int, default=64, help="the random-initialised model's hidden size")
    parser.add_argument("--layers", type=int, default=2, help="its layers")
    parser.add_argument("--address", help="a running cluster's dashboard (else a local head is started)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from workers.training.demo_data import arithmetic_rows
    from workers.training.tinymodel import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="ray-scale-"))
    model, data = work / "model", work / "data.jsonl"
    build_tiny_model(model, hidden_size=args.hidden, layers=args.layers)
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(256)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "1"}

    local = config(work / "local", model, data, args.steps, args.global_batch, args.completion_length)
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, torch; torch.set_num_threads(2); from workers.training.train import "
            "main; sys.exit(main([sys.argv[1]]))",
            str(local),
        ],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    local_rate, _, local_step = throughput(local.parent / "events.jsonl")
    print(f"local: 1 process, 2 threads: {local_rate:.1f} completions/s, median step {local_step:.2f} s")

    head, address = (None, args.address) if args.address else start_head()
    try:
        from ray.job_submission import JobSubmissionClient

        client = JobSubmissionClient(address)
        ray_cfg = config(work / "ray", model, data, args.steps, args.global_batch // 2, args.completion_length)
        submitted = time.time()
        job = client.submit_job(
            entrypoint=f"{sys.executable} -m workers.training.ray_train {ray_cfg} --num-workers 2 --threads 1",
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}},
        )
        while client.get_job_status(job).value not in ("SUCCEEDED", "FAILED", "STOPPED"):
            time.sleep(1)
        if client.get_job_status(job).value != "SUCCEEDED":
            raise SystemExit(client.get_job_logs(job)[-3000:])
        ray_rate, first_step, ray_step = throughput(ray_cfg.parent / "events.jsonl")
    finally:
        if head is not None:
            stop_session(head.pid)
    print(f"ray: 2 Ray Train workers, 1 thread each: {ray_rate:.1f} completions/s, median step {ray_step:.2f} s")
    local_phases, ray_phases = phases(local.parent / "events.jsonl"), phases(ray_cfg.parent / "events.jsonl")
    for phase in ("generation", "update"):
        print(
            f"{phase}: local {local_phases[phase]:.3f} s, ray rank 0 {ray_phases[phase]:.3f} s "
            f"(x{local_phases[phase] / ray_phases[phase]:.2f})"
        )
    print(f"submit_to_first_step_s={first_step - submitted:.1f}")
    print(f"ray_scale_ratio={ray_rate / local_rate:.2f}")


if __name__ == "__main__":
    main()
