"""Ray's cost and scaling on the training program: Ray runs side by side with local processes, in rounds.

    python -m bench.ray_scale [--rounds 3] [--steps 12] [--batch 512] [--completion-length 32] [--hidden 64]
                              [--layers 2] [--address http://...:8265]

Every run trains the tiny model with the same program on the same rows, each process on a batch of ``--batch``
completions a step (8 per prompt) of up to 32 tokens, and counts completions per second between its first and its last
step's events (start-up excluded). The default batch, 512, makes a step about a second: a step's fixed costs (some 20
exchanges between the processes in TRL's step, the logging) then weigh about as little as they do in a real run's
step, where they would dominate a 0.3 s step of 128 completions. A round runs, one after another (the next round in the
reverse order, so that a drift of the machine's load weighs on both sides):

- ``local-1t``: ``workers.training.train``, 1 process of 1 torch thread;
- ``ray-1w``: ``workers.training.ray_train``, 1 Ray Train worker of 1 thread (DDP over gloo);
- ``ray-2w``: 2 Ray Train workers of 1 thread each, each on that same batch (the step's batch doubles);
- ``local-pair``: 2 ``local-1t`` processes at once, independent of each other: what two processes of this program
  get from the machine at that moment, the most any engine's weak scaling can reach there (about 2 on an idle
  2-core machine, less while other work shares it);
- ``ddp-2``: the same 2 ranks with no Ray: ``torchrun --nproc_per_node 2`` starts the program twice, one DDP group
  over gloo, 1 thread each, each on that same batch: what two ranks in lockstep (TRL's step exchanges, the gradients'
  allreduce) get from the machine, the reference for ray-2w that leaves out only Ray.

and gives, each round:

- ``ray_overhead_ratio`` = ray-1w / local-1t: what Ray itself costs (goal >= 0.95);
- ``ray_weak_scaling`` = ray-2w / local-1t: the engine's weak scaling (goal >= 1.8);
- ``local_pair_scaling`` = local-pair / local-1t: the machine's ceiling for the line above, at that moment;
- ``ddp_weak_scaling`` = ddp-2 / local-1t: two ranks without Ray; and ``ray_vs_ddp`` = ray-2w / ddp-2: what Ray costs
  two ranks (1.0: nothing).

Beside each rate it prints the CPU the run's training processes got in its window (cores) and, for the Ray runs, what
Ray's own processes used there (raylet, GCS, the Ray Train controller and its actors, the driver): a ratio below its
goal with fewer cores than the configuration asks for (1, or 2) is the machine's share, not the engine. Then each
ratio's median and range over the rounds, each phase's median (TRL's generation, the update) for local-1t and ray-2w's
rank 0, and ``submit_to_first_step_s`` (the 2-worker job's start to its first step's event, median). Last line, the
medians: ``ray_overhead_ratio=<x> ray_weak_scaling=<y>``.

How the engine is measured fairly on a small shared machine:

- Without --address the script starts a local Ray head of 2 CPUs with a minimal footprint: no dashboard, Ray's
  metrics and task events off, usage stats off, in a temporary directory of its own; it stops it (every process of
  it) at the end. Without the dashboard there is no Jobs API: each run's driver is started as a plain Ray driver
  (``RAY_ADDRESS``) with the command line ``workers.rayjobs`` submits, and its workers get the job's environment from
  the head. With --address the jobs go through that cluster's Jobs API, as the app submits them (no CPU figures then).
- The Ray head, each local run and the pair are each in a session of their own: Linux shares a busy machine's CPU
  between sessions, so the 2 Ray workers (one session with the head) and the pair (one session) are treated alike.
- Windows of ``--steps`` steps, several rounds, and the median: one step of another user's work on the machine would
  otherwise move a ratio by tens of percent.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.registry import parse_args

ROOT = Path(__file__).resolve().parent.parent
# the job's environment (workers.rayjobs.JOB_ENV's, and 1 OpenMP thread as for the local processes)
JOB_ENV = {
    "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "attach"), str(ROOT / "protocol"))),
    "HF_HUB_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
}
# a Ray head that spends as little of 2 cores as it can on itself: no dashboard (below), no metrics, no task events
LEAN_RAY = {
    "RAY_enable_metrics_collection": "0",
    "RAY_task_events_report_interval_ms": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}
RAY_WORKER = "ray::RayTrainWorker"


def config(folder: Path, model: Path, data: Path, steps: int, batch: int, length: int) -> Path:
    from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig

    cfg = TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(folder / "out"),
        event_log=str(folder / "events.jsonl"),
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        grpo=GRPOFields(
            num_generations=8,
            per_device_train_batch_size=batch,
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


def step_times(event_log: Path) -> list[float]:
    from grpo_web_protocol.events import read_events

    events, _ = read_events(event_log)
    first_seen: dict[int, float] = {}
    for e in events:
        if e["type"] == "metrics" and "step" in e:
            first_seen.setdefault(e["step"], e["ts"])
    return sorted(first_seen.values())


def throughput(event_log: Path) -> tuple[float, float, float]:
    """(completions per second between the first and the last step, time of the first step's event, of the last)."""
    from grpo_web_protocol.events import read_events

    events, _ = read_events(event_log)
    batches = [e for e in events if e["type"] == "rollouts"]
    steps = step_times(event_log)
    # the first batch trains the first step: the completions of the later ones are made between the first step's
    # event and the last's
    completions = sum(len(b.get("rows") or []) for b in batches[1:])
    return completions / (steps[-1] - steps[0]), steps[0], steps[-1]


def phases(event_log: Path) -> dict[str, float]:
    """Median seconds of TRL's generation and of the update, per step after the first (rank 0's on Ray)."""
    from grpo_web_protocol.events import read_events

    events, _ = read_events(event_log)
    timed = [e["metrics"] for e in events if e["type"] == "metrics" and "timing/step_s" in e.get("metrics", {})][1:]
    return {k: statistics.median(m[f"timing/{k}_s"] for m in timed) for k in ("generation", "update")}


class CpuMeter(threading.Thread):
    """Samples, every 0.2 s, the CPU seconds used so far by the processes ``members()`` names, by group (``members``
    returns {pid: group}, a process's latest group counts); a process that has exited keeps its last reading."""

    def __init__(self, members):
        super().__init__(daemon=True)
        self.members = members
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        import psutil

        procs: dict[int, tuple[psutil.Process, str]] = {}
        last: dict[int, float] = {}
        while not self.stopped.is_set():
            for pid, group in self.members().items():
                if pid in procs:
                    procs[pid] = (procs[pid][0], group)  # a Ray worker is named once it is given its actor
                    continue
                try:
                    procs[pid] = (psutil.Process(pid), group)
                except psutil.Error:
                    continue
            for pid, (proc, _) in procs.items():
                try:
                    t = proc.cpu_times()
                    last[pid] = t.user + t.system
                except psutil.Error:
                    pass
            totals: dict[str, float] = {}
            for pid, (_, group) in procs.items():
                totals[group] = totals.get(group, 0.0) + last.get(pid, 0.0)
            self.samples.append((time.time(), totals))
            self.stopped.wait(0.2)

    def stop(self) -> None:
        self.stopped.set()
        self.join()

    def cores(self, start: float, end: float) -> dict[str, float]:
        """Each group's CPU seconds between ``start`` and ``end``, over that time: the cores it used there."""
        if not self.samples:
            return {}
        a = min(self.samples, key=lambda s: abs(s[0] - start))
        b = min(self.samples, key=lambda s: abs(s[0] - end))
        if b[0] <= a[0]:
            return {}
        return {g: (b[1].get(g, 0.0) - a[1].get(g, 0.0)) / (b[0] - a[0]) for g in b[1]}


# torch's gloo on the CPU: a rank sometimes aborts in C++ teardown once the program has returned (also seen under
# DeepSpeed, tests/attach/test_attach_end_to_end.py); its training and its event log are whole by then
TEARDOWN_ABORT = "terminate called without an active exception"


def finished(event_log: Path) -> bool:
    """The program logged its end (the "finished" event): every step's event is in the log."""
    try:
        return any(json.loads(line).get("type") == "finished" for line in event_log.read_text().splitlines() if line)
    except (OSError, ValueError):
        return False


def metered(proc: subprocess.Popen, members, what: str, *, event_log: Path | None = None) -> CpuMeter:
    """``proc`` waited for while a CpuMeter samples ``members()``; stops the script, with the end of the process's
    output (the one pipe it has), when it fails. ``event_log``: a failure by TEARDOWN_ABORT after the program logged
    its end is said and measured, not a failure."""
    meter = CpuMeter(members)
    meter.start()
    out, err = proc.communicate()
    meter.stop()
    said = (out or err or b"").decode(errors="replace")
    if proc.returncode != 0 and event_log is not None and TEARDOWN_ABORT in said and finished(event_log):
        print(f"  ({what}: a rank aborted in teardown after the run had finished; its steps are measured)", flush=True)
        return meter
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{(out or err or b'').decode(errors='replace')[-3000:]}")
    return meter


def session_members(sid: int, classify) -> dict[int, str]:
    import psutil

    found = {}
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                found[p.pid] = classify(p)
        except (OSError, psutil.Error):
            continue
    return found


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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalHead:
    """A Ray head of 2 CPUs on this machine, lean (LEAN_RAY, no dashboard), in a session and a directory of its own."""

    def __init__(self):
        self.port = free_port()
        self.temp = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))  # short: Ray's socket paths live under it
        self.env = {**os.environ, **JOB_ENV, **LEAN_RAY}
        start = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "ray"),
                "start",
                "--head",
                "--port",
                str(self.port),
                "--num-cpus",
                "2",
                "--num-gpus",
                "0",
                "--include-dashboard",
                "false",
                "--disable-usage-stats",
                "--temp-dir",
                str(self.temp),
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.sid = start.pid  # `ray start` returns once the head is up; its processes stay in its session
        out, _ = start.communicate(timeout=180)
        if start.returncode != 0:
            self.stop()
            raise SystemExit(f"the Ray head did not start (ray start):\n{out.decode(errors='replace')[-3000:]}")

    def run(self, cfg: Path, workers: int) -> tuple[float, CpuMeter]:
        """The job's driver, started as ``workers.rayjobs`` would have the Jobs API start it; (its start, its CPU)."""
        started = time.time()
        driver = subprocess.Popen(
            [sys.executable, "-m", "workers.training.ray_train", str(cfg), "--num-workers", str(workers)],
            cwd=ROOT,
            env={**self.env, "RAY_ADDRESS": f"127.0.0.1:{self.port}"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

        def members():
            found = session_members(self.sid, lambda p: "workers" if p.name() == RAY_WORKER else "ray")
            found[driver.pid] = "ray"
            return found

        return started, metered(driver, members, "the Ray job")

    def stop(self) -> None:
        stop_session(self.sid)
        shutil.rmtree(self.temp, ignore_errors=True)


class RemoteCluster:
    """A running cluster's Jobs API (--address): the jobs are submitted as the app submits them."""

    def __init__(self, address: str):
        from ray.job_submission import JobSubmissionClient

        self.client = JobSubmissionClient(address)

    def run(self, cfg: Path, workers: int) -> tuple[float, None]:
        started = time.time()
        job = self.client.submit_job(
            entrypoint=f"{sys.executable} -m workers.training.ray_train {cfg} --num-workers {workers}",
            runtime_env={"env_vars": JOB_ENV},
        )
        while self.client.get_job_status(job).value not in ("SUCCEEDED", "FAILED", "STOPPED"):
            time.sleep(1)
        if self.client.get_job_status(job).value != "SUCCEEDED":
            raise SystemExit(self.client.get_job_logs(job)[-3000:])
        return started, None

    def stop(self) -> None:
        pass


LAUNCH = "import sys, torch; torch.set_num_threads(1); from workers.training.train import main; sys.exit(main([sys.argv[1]]))"


def run_local(cfgs: list[Path]) -> CpuMeter:
    """``len(cfgs)`` local processes of the training program, 1 torch thread each, at once, in a session of their own
    (started by a shell there, which fails if one of them fails)."""
    script = "".join(f'"$0" -c "$1" "${i + 2}" & p{i}=$!; ' for i in range(len(cfgs)))
    script += "rc=0; " + "".join(f"wait $p{i} || rc=1; " for i in range(len(cfgs))) + "exit $rc"
    shell = subprocess.Popen(
        ["bash", "-c", script, sys.executable, LAUNCH, *map(str, cfgs)],
        cwd=ROOT,
        env={**os.environ, **JOB_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    return metered(shell, lambda: session_members(shell.pid, lambda p: "workers"), "a local run")


def run_ddp(cfg: Path) -> CpuMeter:
    """The program as 2 ranks of one DDP group started by torchrun (no Ray); rank 0 writes the
    event log, as on Ray. torchrun leaves OMP_NUM_THREADS (1, JOB_ENV's) as it is: 1 torch thread a rank."""
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port())]
    proc = subprocess.Popen(
        [*launch, "-m", "workers.training.train", str(cfg)],
        cwd=ROOT,
        env={**os.environ, **JOB_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )

    def members() -> dict[int, str]:  # torchrun's ranks (it starts each in a session of its own)
        import psutil

        try:
            return {c.pid: "workers" for c in psutil.Process(proc.pid).children(recursive=True)}
        except psutil.Error:
            return {}

    return metered(proc, members, "the torchrun run", event_log=cfg.parent / "events.jsonl")


def measure(logs: list[Path], meter: CpuMeter | None) -> dict:
    """The run's rate (its processes' together), window, and cores (the training processes', Ray's own)."""
    rates = [throughput(log) for log in logs]
    start, end = min(r[1] for r in rates), max(r[2] for r in rates)
    cores = meter.cores(start, end) if meter else {}
    return {"rate": sum(r[0] for r in rates), "window": end - start, "first": start, **cores}


def show(name: str, m: dict) -> None:
    cores = f", {m['workers']:.2f} cores" if "workers" in m else ""
    ray = f", Ray's own processes {m['ray']:.2f} cores" if "ray" in m else ""
    print(f"  {name:10s} {m['rate']:6.1f} completions/s over {m['window']:4.1f} s{cores}{ray}", flush=True)


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} (rounds: {', '.join(f'{v:.2f}' for v in values)})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=512, help="completions a step of each process (8 per prompt)")
    parser.add_argument("--completion-length", type=int, default=32, help="max_completion_length")
    parser.add_argument("--hidden", type=int, default=64, help="the random-initialised model's hidden size")
    parser.add_argument("--layers", type=int, default=2, help="its layers")
    parser.add_argument("--address", help="a running cluster's dashboard (else a lean local head is started)")
    args = parse_args(parser, None, rounds=1, steps=3, batch=16, completion_length=8)
    # a `timeout` or Ctrl-C still stops the Ray head this script started (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.path.insert(0, str(ROOT))
    from grpo_web_protocol.demo_data import arithmetic_rows

    from workers.training.tinymodel import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="ray-scale-"))
    atexit.register(shutil.rmtree, work, True)  # its models, configs and event logs, whether the runs ended or failed
    model, data = work / "model", work / "data.jsonl"
    build_tiny_model(model, hidden_size=args.hidden, layers=args.layers)
    # rows enough for every step of the 2-worker run: no epoch ends in a window
    rows = arithmetic_rows(max(256, args.steps * 2 * args.batch // 8 + 64))
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def cfg(name: str) -> Path:
        return config(work / name, model, data, args.steps, args.batch, args.completion_length)

    names = ("ray_overhead_ratio", "ray_weak_scaling", "local_pair_scaling", "ddp_weak_scaling", "ray_vs_ddp")
    ratios: dict[str, list[float]] = {k: [] for k in names}
    logs: dict[str, list[Path]] = {"local-1t": [], "ray-2w": []}
    latencies = []
    cluster = RemoteCluster(args.address) if args.address else LocalHead()
    try:
        for r in range(args.rounds):
            print(f"round {r + 1} of {args.rounds}:", flush=True)
            got = {}
            order = ["local-1t", "ray-1w", "ray-2w", "ddp-2", "local-pair"]
            for name in order if r % 2 == 0 else order[::-1]:
                if name.startswith("ray"):
                    workers = int(name[4])
                    path = cfg(f"{name}-{r}")
                    started, meter = cluster.run(path, workers)
                    got[name] = measure([path.parent / "events.jsonl"], meter)
                    if workers == 2:
                        latencies.append(got[name]["first"] - started)
                        logs["ray-2w"].append(path.parent / "events.jsonl")
                elif name == "ddp-2":
                    path = cfg(f"{name}-{r}")
                    got[name] = measure([path.parent / "events.jsonl"], run_ddp(path))
                else:
                    paths = [cfg(f"{name}-{r}-{i}") for i in range(2 if name == "local-pair" else 1)]
                    got[name] = measure([p.parent / "events.jsonl" for p in paths], run_local(paths))
                    if name == "local-1t":
                        logs["local-1t"].append(paths[0].parent / "events.jsonl")
                show(name, got[name])
            base = got["local-1t"]["rate"]
            round_ratios = {
                "ray_overhead_ratio": got["ray-1w"]["rate"] / base,
                "ray_weak_scaling": got["ray-2w"]["rate"] / base,
                "local_pair_scaling": got["local-pair"]["rate"] / base,
                "ddp_weak_scaling": got["ddp-2"]["rate"] / base,
                "ray_vs_ddp": got["ray-2w"]["rate"] / got["ddp-2"]["rate"],
            }
            for k, v in round_ratios.items():
                ratios[k].append(v)
            print("  " + " ".join(f"{k}={v:.3f}" for k, v in round_ratios.items()), flush=True)
    finally:
        cluster.stop()

    for name in ("local-1t", "ray-2w"):
        ph = [phases(log) for log in logs[name]]
        print(
            f"{name} per step: generation {statistics.median(p['generation'] for p in ph):.3f} s, "
            f"update {statistics.median(p['update'] for p in ph):.3f} s" + (" (rank 0)" if name == "ray-2w" else "")
        )
    for k, values in ratios.items():
        print(f"{k}: {spread(values)}")
    print(f"submit_to_first_step_s={statistics.median(latencies):.1f}")
    print(
        f"ray_overhead_ratio={statistics.median(ratios['ray_overhead_ratio']):.3f} "
        f"ray_weak_scaling={statistics.median(ratios['ray_weak_scaling']):.2f}"
    )


if __name__ == "__main__":
    main()
