"""The GPU paths on one GPU, with nothing downloaded: ``python -m bench.gpu_smoke`` (bench/gpu_smoke.sh installs
the gpu and verl extras first, or, on a machine with no package index, the carried wheels of bench/gpu_wheels.sh).
About 6 minutes on one H100-class GPU. Django-free: it runs where only the training program's packages are.

A small random-initialised Qwen2-shaped model is saved locally (workers.training.tinymodel, larger than the CPU tests' one),
then the training programs run on it as the worker starts them (``python -m workers.training.train`` / ``workers.training.verl_run``
with a config file), each timed from its own event log:

1. TRL with HF generate, then TRL with vLLM colocate, the same run otherwise: the median step time of each
   (``timing/step_s``, first step left out) and their ratio, ``vllm_step_speedup``.
2. vLLM server mode: TRL's vLLM server (``trl.scripts.vllm_serve``) started as the worker starts it; with two GPUs a
   server-mode run trains against it (the server on its own GPU); with one, the server generates for a client (TRL's
   weight sync needs a GPU of its own for NCCL).
3. A 5-step verl GRPO run (workers.training.verl_run: Ray, FSDP actor, vLLM rollout), its rollouts and metrics checked.
4. GPU telemetry: nvidia-smi sampled throughout and read by the worker's own parser (runs.telemetry), peak memory
   and utilisation per GPU.

A part whose modules are not importable here is skipped, not failed: on a lent machine with no package index
(bench/gpu_smoke.sh's offline mode) vLLM, verl and Ray are absent, since their GPU wheels are past what can be
carried there, so parts 1's vLLM half, 2 and 3 are skipped, named on a ``skipped=`` line with their reasons on stderr.

Prints ``name=value`` lines; the last is ``vllm_step_speedup=<x>``, or ``hf_generate_step_s=<x>`` when vLLM's parts
were skipped (no ratio to take). Exits non-zero when a part fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = int(os.environ.get("SMOKE_STEPS", "6"))
if "--quick" in sys.argv[1:]:  # the same parts on the fewest steps that give a step time (the first is left out)
    STEPS = 3
VERL_STEPS = 5
# the modules each optional part imports; a part with one of them missing here is skipped
PART_MODULES = {"vllm_colocate": ("vllm",), "vllm_server": ("vllm",), "verl": ("verl", "ray", "vllm")}


def skipped_parts(importable=lambda module: importlib.util.find_spec(module) is not None) -> dict[str, str]:
    """The parts that cannot run in this environment, each with the reason."""
    skipped = {}
    for part, modules in PART_MODULES.items():
        absent = [m for m in modules if not importable(m)]
        if absent:
            skipped[part] = (
                f"{', '.join(absent)} not importable here (on a lent machine with no package index only the training "
                "program's wheels are carried: vLLM's GPU wheel and Ray's are past what can travel)"
            )
    return skipped


def last_line(results: dict[str, float], skipped: dict[str, str]) -> str:
    """The figure the smoke ends on: the vLLM speedup, or HF generate's step time where vLLM's part was skipped."""
    if "vllm_colocate" in skipped:
        return f"hf_generate_step_s={results.get('hf', float('nan')):.3f}"
    speedup = results["hf"] / results["colocate"] if "hf" in results and "colocate" in results else float("nan")
    return f"vllm_step_speedup={speedup:.2f}"


def unmet_requirements(wheel_dir: Path) -> list[str]:
    """What the wheels in ``wheel_dir`` need that this python lacks, or a carried wheel shadowed by another version:
    one line each, empty when all is met (checked before the offline smoke spends GPU time)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    problems = []
    for wheel in sorted(wheel_dir.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} {version} is carried but not installed")
            continue
        if dist.version != version:
            problems.append(f"{name} {version} is carried but {dist.version} is the one imported")
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue  # an extra's or another platform's requirement
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                problems.append(f"{name} {version} needs {req}: not installed")
                continue
            if not req.specifier.contains(have, prereleases=True):
                problems.append(f"{name} {version} needs {req}: {have} is installed")
    return problems


def rows(n: int = 256) -> list[dict]:
    from grpo_web_protocol.demo_data import arithmetic_rows

    return [{"prompt": r["prompt"], "answer": str(r["answer"])} for r in arithmetic_rows(n, seed=3)]


def train_config(out: Path, model: Path, data: Path, **grpo):
    from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig

    fields = dict(
        num_generations=8,
        per_device_train_batch_size=32,
        max_completion_length=128,
        max_steps=STEPS,
        learning_rate=1e-5,
        save_steps=0,
        gradient_checkpointing=False,
        temperature=1.0,
    )
    return TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(out / "output"),
        event_log=str(out / "events.jsonl"),
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        grpo=GRPOFields(**{**fields, **grpo}),
    )


def env(gpus: str) -> dict:
    # the checkout first, then what the caller put on the path (the carried wheels and attach/, offline)
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": gpus,
        "PYTHONPATH": path,
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


def program(module: str, config, work: Path, gpus: str = "0", timeout: float = 240) -> list[dict]:
    """Run a training program on a config, as the worker does; its events."""
    from grpo_web_protocol.events import read_events

    work.mkdir(parents=True, exist_ok=True)
    path = work / "config.json"
    path.write_text(config.to_json())
    with open(work / "train.log", "wb") as log:
        proc = subprocess.run(
            [sys.executable, "-m", module, str(path)],
            cwd=ROOT,
            env=env(gpus),
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    events = read_events(config.event_log)[0]
    if proc.returncode != 0 or not any(e["type"] == "finished" for e in events):
        tail = (work / "train.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{module} ({work.name}) exited {proc.returncode}:\n{tail}")
    return events


def step_time(events: list[dict]) -> float:
    times = [
        e["metrics"]["timing/step_s"]
        for e in events
        if e["type"] == "metrics" and e["metrics"].get("timing/step_s") and e["step"] > 1
    ]
    if not times:
        raise RuntimeError("no timed steps in the event log")
    return statistics.median(times)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vllm_server(model: Path, gpu: str, log: Path, memory: float) -> tuple[subprocess.Popen, int]:
    """TRL's vLLM server, the command line the worker uses (workers.placement.start_vllm_server)."""
    from workers.processes import wait_until_answers  # Django's side: present wherever vLLM is installed

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trl.scripts.vllm_serve",
            "--model",
            str(model),
            "--port",
            str(port),
            "--gpu_memory_utilization",
            str(memory),
        ],
        cwd=ROOT,
        env=env(gpu),
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_answers(proc, f"http://127.0.0.1:{port}/health", 180, what="the vLLM server", every=2)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}: {log.read_text(errors='replace')[-2000:]}") from None
    return proc, port


def detect_gpus() -> list[dict]:
    """The GPUs nvidia-smi lists, read by the training program's parser (Django-free, unlike the worker's registry)."""
    from grpo_web_protocol.resources import NVIDIA_SMI_QUERY, parse_nvidia_smi

    if not shutil.which("nvidia-smi"):
        return []
    out = subprocess.run(["nvidia-smi", *NVIDIA_SMI_QUERY], capture_output=True, text=True).stdout
    return parse_nvidia_smi(out, None)


class GpuSampler:
    """nvidia-smi every second, read by the worker's parser (grpo_web_protocol.resources.parse_nvidia_smi)."""

    def __init__(self):
        self.samples: list[list[dict]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        from grpo_web_protocol.resources import NVIDIA_SMI_QUERY, parse_nvidia_smi

        while not self.stop.wait(1.0):
            out = subprocess.run(["nvidia-smi", *NVIDIA_SMI_QUERY], capture_output=True, text=True).stdout
            self.samples.append(parse_nvidia_smi(out, None))

    def summary(self) -> dict:
        peak: dict = {}
        for sample in self.samples:
            for gpu in sample:
                p = peak.setdefault(gpu["index"], {"memory_used_mb": 0, "utilization": 0.0})
                p["memory_used_mb"] = max(p["memory_used_mb"], (gpu.get("mem_used") or 0) // 2**20)  # bytes -> MiB
                p["utilization"] = max(p["utilization"], gpu.get("util") or 0.0)
        return peak


def main() -> int:
    from workers.training.tinymodel import build_tiny_model

    gpus = detect_gpus()
    if not gpus:
        print("gpu_smoke: no CUDA GPU", file=sys.stderr)
        return 2
    work = Path(os.environ.get("SMOKE_DIR", ROOT / "var" / "gpu-smoke"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    model = build_tiny_model(work / "model", hidden_size=512, layers=8, seed=0)  # ~30M parameters, Qwen2-shaped
    data = work / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows()))
    sampler = GpuSampler()
    sampler.thread.start()
    failures: list[str] = []
    results: dict[str, float] = {}
    started = time.monotonic()
    skipped = skipped_parts()

    def part(name, fn):
        if name in skipped:
            print(f"{name}=skipped: {skipped[name]}", file=sys.stderr, flush=True)
            return
        t = time.monotonic()
        try:
            fn()
            print(f"{name}_s={time.monotonic() - t:.1f}", flush=True)
        except Exception as exc:  # each part reports, the rest still run
            failures.append(name)
            print(f"{name}=failed: {exc}", file=sys.stderr, flush=True)

    def hf():
        results["hf"] = step_time(
            program("workers.training.train", train_config(work / "hf", model, data), work / "hf")
        )
        print(f"hf_generate_step_s={results['hf']:.3f}", flush=True)

    def colocate():
        config = train_config(
            work / "colocate", model, data, use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3
        )
        results["colocate"] = step_time(program("workers.training.train", config, work / "colocate"))
        print(f"vllm_colocate_step_s={results['colocate']:.3f}", flush=True)

    def server():
        two = len(gpus) >= 2
        proc, port = vllm_server(model, "1" if two else "0", work / "vllm-server.log", 0.5 if two else 0.3)
        try:
            if two:
                config = train_config(work / "server", model, data, use_vllm=True, vllm_mode="server")
                config.vllm_server_port = port
                print(f"vllm_server_step_s={step_time(program('workers.training.train', config, work / 'server')):.3f}")
            else:
                from trl.generation.vllm_client import VLLMClient

                client = VLLMClient(base_url=f"http://127.0.0.1:{port}", connection_timeout=60)
                t = time.monotonic()
                out = client.generate([r["prompt"] for r in rows(64)], n=8, max_tokens=128)
                ids = out["completion_ids"]
                print(f"vllm_server_completions={len(ids)}")
                print(f"vllm_server_generate_s={time.monotonic() - t:.3f}")
                if len(ids) != 64 * 8:
                    raise RuntimeError(f"{len(ids)} completions, not {64 * 8}")
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    def verl():
        config = train_config(
            work / "verl",
            model,
            data,
            num_generations=4,
            per_device_train_batch_size=16,
            max_completion_length=64,
            max_steps=VERL_STEPS,
            vllm_gpu_memory_utilization=0.3,
        )
        config.trainer = "verl"
        events = program("workers.training.verl_run", config, work / "verl", timeout=360)
        steps = sorted({e["step"] for e in events if e["type"] == "metrics" and "reward" in e["metrics"]})
        batches = [e for e in events if e["type"] == "rollouts"]
        print(f"verl_steps={len(steps)}")
        print(f"verl_rollouts={sum(len(b['rows']) for b in batches)}")
        if steps[-1:] != [VERL_STEPS] or len(batches) != VERL_STEPS:
            raise RuntimeError(f"verl logged steps {steps} and {len(batches)} rollout batches, not {VERL_STEPS}")
        if any(r["advantage"] is None for b in batches for r in b["rows"]):
            raise RuntimeError("a verl rollout has no advantage")

    part("hf_generate", hf)
    part("vllm_colocate", colocate)
    part("vllm_server", server)
    part("verl", verl)
    sampler.stop.set()
    sampler.thread.join()
    for index, peak in sorted(sampler.summary().items()):
        print(f"gpu{index}_peak_memory_mb={peak['memory_used_mb']}")
        print(f"gpu{index}_peak_utilization={peak['utilization']:.0f}")
    print(f"gpu_samples={len(sampler.samples)}")
    print(f"total_s={time.monotonic() - started:.1f}")
    if skipped:
        print(f"skipped={','.join(skipped)}")
    if failures:
        print(f"failed={','.join(failures)}", file=sys.stderr)
    print(last_line(results, skipped))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
