"""Resource telemetry per run: the worker samples the training process tree (CPU, RSS) and the visible GPUs into
ResourceSample rows while it supervises; the run page reads them, with the step time split the training program
logs (``timing/...`` in StepMetric), as charts.

Measuring never raises: a process that exits mid-sample is not counted, a failing nvidia-smi turns GPU sampling off.
Only the database write may fail, and the supervisor handles that as it handles its other writes.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time

import psutil
from django.conf import settings
from django.utils import timezone

from runs.models import ResourceSample, Run

log = logging.getLogger(__name__)

NVIDIA_SMI_QUERY = ["--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total",
                    "--format=csv,noheader,nounits"]
NVIDIA_SMI_TIMEOUT = 5.0
MB = 1e6


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


class ResourceSampler:
    """Samples one training process and its descendants (sandboxed reward functions included) every
    GRPO_TELEMETRY_SECONDS. ``cpu_percent`` measures since its previous call on the same Process object, so the
    objects are kept across samples, one per pid (a pid reused by a new process gets a new object)."""

    def __init__(self, run: Run, pid: int, gpus: str | None = None):
        self.run = run
        self.pid = pid
        self.gpus = gpus  # the run's GPUs (CUDA_VISIBLE_DEVICES form): only these are reported; None: the worker's
        self.procs: dict[int, psutil.Process] = {}
        self.nvidia_smi = shutil.which("nvidia-smi")
        self.interval = settings.GRPO_TELEMETRY_SECONDS
        self.next_at = time.monotonic() + self.interval
        self.measure_tree()  # primes cpu_percent; the first sample comes one interval later

    def tick(self) -> ResourceSample | None:
        """A sample when one is due and the process is still there."""
        if time.monotonic() < self.next_at:
            return None
        self.next_at = time.monotonic() + self.interval
        tree = self.measure_tree()
        if tree is None:
            return None
        cpu, rss = tree
        return ResourceSample.objects.create(run=self.run, at=timezone.now(), step=self.run.step, cpu_percent=cpu,
                                             rss_bytes=rss, gpus=self.measure_gpus())

    def measure_tree(self) -> tuple[float, int] | None:
        """CPU % (of one core) and RSS summed over the tree; None once the training process is gone. RSS counts
        pages shared between processes once per process."""
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
            out = subprocess.run([self.nvidia_smi, *NVIDIA_SMI_QUERY], capture_output=True, text=True, check=True,
                                 timeout=NVIDIA_SMI_TIMEOUT).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("run %s: nvidia-smi failed (%s); no GPU telemetry for this attempt", self.run.pk, exc)
            self.nvidia_smi = None
            return []
        return parse_nvidia_smi(out, self.gpus if self.gpus is not None else os.environ.get("CUDA_VISIBLE_DEVICES"))
