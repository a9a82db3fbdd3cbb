"""Measuring what training uses, with no Django: CPU and RSS of a process and its descendants (psutil) and the GPUs'
utilisation and memory (nvidia-smi).

The worker's sampler (``runs.telemetry.sampler``) measures a local training process with it. A Ray run's ranks are on
the cluster's nodes, out of the worker's reach, so each rank measures itself (``workers.training.ray_train``) and appends one
JSON line a sample to a file of its own, ``<run folder>/resources/<Ray job>/rank-<r>.jsonl`` (the run folder is on
storage every node shares; one folder per attempt's job, so a resumed run never reads an earlier attempt's lines);
the worker's RaySampler reads the files back (``parse_rank_sample``) into the same ResourceSample rows.

Measuring never raises: a process that exits mid-sample is not counted, a failing nvidia-smi turns GPU sampling off.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

NVIDIA_SMI_QUERY = ["--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total", "--format=csv,noheader,nounits"]
NVIDIA_SMI_TIMEOUT = 5.0
RANK_FILE = "rank-{rank}.jsonl"
MAX_GPUS = 64  # per rank sample: more is not a sample this program wrote
MAX_BYTES = 2**60
MAX_NODE = 255  # characters of a node's name kept


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None


def _mib(text: str) -> int | None:
    value = _number(text)
    return None if value is None else int(value * 2**20)


def parse_nvidia_smi(text: str, visible: str | None) -> list[dict]:
    """nvidia-smi's CSV (index, uuid, utilization %, memory used and total in MiB) as ResourceSample.gpus: only
    the GPUs ``visible`` (CUDA_VISIBLE_DEVICES: indices or UUIDs, possibly abbreviated) names, all when it is None."""
    wanted = None if visible is None else [v.strip() for v in visible.split(",") if v.strip()]
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit():
            continue
        index, uuid, util, used, total = fields
        if wanted is not None and not any(w == index or (w.startswith("GPU-") and uuid.startswith(w)) for w in wanted):
            continue
        gpus.append({"index": int(index), "util": _number(util), "mem_used": _mib(used), "mem_total": _mib(total)})
    return gpus


class ResourceMeter:
    """Measures one process and its descendants (sandboxed reward functions included), and the GPUs ``gpus`` names
    (CUDA_VISIBLE_DEVICES form; None: this process's CUDA_VISIBLE_DEVICES, or every GPU). ``cpu_percent`` measures
    since its previous call on the same Process object, so the objects are kept across samples, one per pid (a pid
    reused by a new process gets a new object)."""

    def __init__(self, pid: int, gpus: str | None = None, name: str = "this process"):
        self.pid = pid
        self.gpus = gpus
        self.name = name  # who is measured, for the log
        self.procs: dict[int, psutil.Process] = {}
        self.nvidia_smi = shutil.which("nvidia-smi")
        self.measure_tree()  # primes cpu_percent: the first measure that counts is the next one

    def measure_tree(self) -> tuple[float, int] | None:
        """CPU % (of one core) and RSS summed over the tree; None once the process is gone. RSS counts pages shared
        between processes once per process."""
        try:
            root = self.procs.get(self.pid) or psutil.Process(self.pid)
            found = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        cpu, rss, kept = 0.0, 0, {}
        for proc in found:
            known = self.procs.get(proc.pid)
            proc = known if known == proc else proc
            try:
                with proc.oneshot():
                    alive = proc.status() != psutil.STATUS_ZOMBIE  # exited, not yet reaped: nothing to measure
                    if alive:
                        cpu, rss = cpu + proc.cpu_percent(), rss + proc.memory_info().rss
            except psutil.Error:
                alive = False
            if alive:
                kept[proc.pid] = proc
            elif proc.pid == self.pid:
                return None
        self.procs = kept
        return cpu, rss

    def measure_gpus(self) -> list[dict]:
        if not self.nvidia_smi:
            return []
        try:
            out = subprocess.run(
                [self.nvidia_smi, *NVIDIA_SMI_QUERY],
                capture_output=True,
                text=True,
                check=True,
                timeout=NVIDIA_SMI_TIMEOUT,
            ).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("%s: nvidia-smi failed (%s); no GPU telemetry from here on", self.name, exc)
            self.nvidia_smi = None
            return []
        return parse_nvidia_smi(out, self.gpus if self.gpus is not None else os.environ.get("CUDA_VISIBLE_DEVICES"))


def rank_folder(run_folder: str | Path, job: str) -> Path:
    """Where the ranks of Ray job ``job`` (one attempt of the run) write their samples."""
    return Path(run_folder) / "resources" / job


class RankTelemetry:
    """One Ray Train rank's telemetry: a daemon thread that every ``interval`` seconds measures this process's tree
    and its GPUs and appends them as one line to ``folder/rank-<rank>.jsonl``: {ts, rank, node, cpu_percent,
    rss_bytes, gpus}. It never fails training: a write that fails (the shared storage away) is logged once and tried
    again next time."""

    def __init__(self, folder: str | Path, rank: int, interval: float, *, node: str, gpus: str | None):
        self.path = Path(folder) / RANK_FILE.format(rank=rank)
        self.rank, self.node, self.interval = rank, node, interval
        self.meter = ResourceMeter(os.getpid(), gpus, name=f"rank {rank}")
        self.stopped = threading.Event()
        self.complained = False
        self.thread = threading.Thread(target=self.loop, name=f"grpo-web-telemetry-{rank}", daemon=True)

    def start(self) -> RankTelemetry:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def sample(self) -> dict | None:
        tree = self.meter.measure_tree()
        if tree is None:
            return None
        cpu, rss = tree
        return {
            "ts": time.time(),
            "rank": self.rank,
            "node": self.node,
            "cpu_percent": cpu,
            "rss_bytes": rss,
            "gpus": self.meter.measure_gpus(),
        }

    def write(self, sample: dict) -> None:
        line = json.dumps(sample) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:  # one writer a file: its lines stay whole
                fh.write(line)
        except OSError as exc:
            self.complain(f"cannot write {self.path} ({exc})")

    def loop(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                sample = self.sample()
                if sample is not None:
                    self.write(sample)
            except Exception as exc:  # never let telemetry take the rank down; the run's log says why it is missing
                self.complain(f"{type(exc).__name__}: {exc}")

    def complain(self, what: str) -> None:
        if not self.complained:
            self.complained = True
            log.warning("rank %s: no resource telemetry: %s", self.rank, what)


def _finite(value, low: float, high: float) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and low <= value <= high


def _byte_count(value) -> bool:
    return type(value) is int and 0 <= value <= MAX_BYTES


def _gpu(data) -> dict | None:
    if not isinstance(data, dict) or not (type(data.get("index")) is int and 0 <= data["index"] < 2**16):
        return None
    util, used, total = data.get("util"), data.get("mem_used"), data.get("mem_total")
    if (util is not None and not _finite(util, 0, 100)) or any(
        v is not None and not _byte_count(v) for v in (used, total)
    ):
        return None
    return {"index": data["index"], "util": None if util is None else float(util), "mem_used": used, "mem_total": total}


def parse_rank_sample(line: bytes | str) -> dict | None:
    """One line of a rank file as {node, cpu_percent, rss_bytes, gpus}; None for anything that is not a sample
    RankTelemetry wrote (a garbled line, a hostile one: wrong types, huge or negative numbers, too many GPUs)."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(data, dict):
        return None
    cpu, rss, gpus, node = data.get("cpu_percent"), data.get("rss_bytes"), data.get("gpus", []), data.get("node", "")
    if not _finite(cpu, 0, 1e6) or not _byte_count(rss) or not isinstance(gpus, list) or len(gpus) > MAX_GPUS:
        return None
    checked = [_gpu(g) for g in gpus]
    if any(g is None for g in checked):
        return None
    return {
        "node": node[:MAX_NODE] if isinstance(node, str) else "",
        "cpu_percent": float(cpu),
        "rss_bytes": rss,
        "gpus": checked,
    }
