"""Resource telemetry per run: the worker samples the training process tree (CPU, RSS) and the visible GPUs into
ResourceSample rows while it supervises; the run page reads them, with the step time split the training program
logs (``timing/...`` in StepMetric), as charts. A Ray run's ranks measure themselves on their nodes and write rank
files in the shared run folder (``grpo_web_protocol.resources``); RaySampler turns those into the same rows.

Measuring never raises: a process that exits mid-sample is not counted, a failing nvidia-smi turns GPU sampling off,
a rank file's garbled line is skipped. Only the database write may fail, and the supervisor handles that as it
handles its other writes.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from grpo_web_protocol.resources import RANK_FILE, ResourceMeter, parse_rank_sample

from runs.models import ResourceSample, Run

MB = 1e6
READ_LIMIT = 2**20  # bytes of one rank file read a tick; a "line" longer than that is skipped
STALE_SECONDS = 30.0  # a rank silent for longer (and longer than a few intervals) no longer counts


class ResourceSampler(ResourceMeter):
    """Samples one training process and its descendants (sandboxed reward functions included) every
    GRPO_TELEMETRY_SECONDS."""

    def __init__(self, run: Run, pid: int, gpus: str | None = None):
        # gpus: the run's GPUs (CUDA_VISIBLE_DEVICES form): only these are reported; None: the worker's. The meter
        # primes cpu_percent: the first sample comes one interval later
        super().__init__(pid, gpus, name=f"run {run.pk}")
        self.run = run
        self.interval = settings.GRPO_TELEMETRY_SECONDS
        self.next_at = time.monotonic() + self.interval

    def tick(self) -> ResourceSample | None:
        """A sample when one is due and the process is still there."""
        if time.monotonic() < self.next_at:
            return None
        self.next_at = time.monotonic() + self.interval
        tree = self.measure_tree()
        if tree is None:
            return None
        cpu, rss = tree
        return ResourceSample.objects.create(
            run=self.run,
            at=timezone.now(),
            step=self.run.step,
            cpu_percent=cpu,
            rss_bytes=rss,
            gpus=self.measure_gpus(),
        )


class RaySampler:
    """A Ray run's samples, from its ranks' files in ``folder`` (``rank-<r>.jsonl``, r below the run's num_workers):
    every GRPO_TELEMETRY_SECONDS it reads the lines each file gained (from the byte offset it had read to; a torn last
    line waits for its end) and writes one ResourceSample: CPU and RSS summed over the ranks' latest samples, their
    GPUs side by side, each with its rank and node. A rank not written yet (or gone silent) is left out."""

    def __init__(self, run: Run, folder: Path):
        self.run = run
        self.folder = Path(folder)
        self.offsets: dict[int, int] = {}
        self.latest: dict[int, dict] = {}
        self.heard_at: dict[int, float] = {}
        self.interval = settings.GRPO_TELEMETRY_SECONDS
        self.stale_after = max(STALE_SECONDS, 5 * self.interval)
        self.next_at = time.monotonic() + self.interval

    def tick(self) -> ResourceSample | None:
        """A sample when one is due and a rank has reported lately."""
        if time.monotonic() < self.next_at:
            return None
        self.next_at = time.monotonic() + self.interval
        for rank in range(self.run.num_workers):
            for line in self.new_lines(rank):
                sample = parse_rank_sample(line)
                if sample is not None:
                    self.latest[rank], self.heard_at[rank] = sample, time.monotonic()
        ranks = [r for r in sorted(self.latest) if time.monotonic() - self.heard_at[r] <= self.stale_after]
        if not ranks:
            return None
        gpus, seen = [], set()
        for rank in ranks:
            node = self.latest[rank]["node"]
            for gpu in self.latest[rank]["gpus"]:
                if (node, gpu["index"]) not in seen:  # ranks on one node that both see its GPU: counted once
                    seen.add((node, gpu["index"]))
                    gpus.append({**gpu, "rank": rank, "node": node})
        return ResourceSample.objects.create(
            run=self.run,
            at=timezone.now(),
            step=self.run.step,
            gpus=gpus,
            cpu_percent=sum(self.latest[r]["cpu_percent"] for r in ranks),
            rss_bytes=sum(self.latest[r]["rss_bytes"] for r in ranks),
        )

    def new_lines(self, rank: int) -> list[bytes]:
        """The whole lines rank ``rank`` appended since the last call; none while its file is not there."""
        offset = self.offsets.get(rank, 0)
        try:
            with open(self.folder / RANK_FILE.format(rank=rank), "rb") as fh:
                fh.seek(offset)
                chunk = fh.read(READ_LIMIT)
        except OSError:
            return []
        end = chunk.rfind(b"\n")
        if end < 0:
            if len(chunk) == READ_LIMIT:  # no line is this long: skip it (its tail fails to parse next time)
                self.offsets[rank] = offset + len(chunk)
            return []
        self.offsets[rank] = offset + end + 1
        return chunk[:end].split(b"\n")
