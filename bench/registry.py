"""Every benchmark in one place: its command, the figures it prints and their goals (docs/bench.md), what
it needs, and how its output is checked. ``python -m bench`` runs them (bench/__main__.py) and
tests/bench/test_benches_run_quick.py runs each one's ``--quick`` mode in CI.

A bench prints ``name=value`` figures, the last line being ``line``'s figures in that order; ``--quick`` runs the
same code path on small data (seconds, not minutes), so the figures it prints then say nothing about speed.
"""

from __future__ import annotations

import argparse
import operator
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"-?[0-9]+(?:\.[0-9]+)?"
GOALS = {">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class Figure:
    name: str
    goal: str = ""  # ">= 5000", "<= 1.02", or "" (a figure with no goal: reported, not judged)

    def met(self, value: float | None) -> bool | None:
        if not self.goal or value is None:
            return None
        op, target = self.goal.split()
        return GOALS[op](value, float(target))


@dataclass(frozen=True)
class Bench:
    name: str
    figures: tuple[Figure, ...]  # every figure it prints, each as name=<number> somewhere in its output
    line: tuple[str, ...]  # the figures of its last line, in order
    about: str  # what it measures, a sentence
    needs: tuple[str, ...] = ()  # "postgres", "chromium", "ray", "vllm_cpu", "gpu"
    quick_ci: str = ""  # why CI's quick-mode test does not run it ("": it does)
    note: str = ""  # a word on a goal the bench does not reach, or on its quick mode
    command: tuple[str, ...] = ()  # else python -m bench.<name>
    module: str = ""  # else bench.<name>

    def argv(self, *extra: str) -> list[str]:
        base = list(self.command) if self.command else [sys.executable, "-m", self.module or f"bench.{self.name}"]
        return base + list(extra)

    @property
    def last_line(self) -> re.Pattern:
        return re.compile(" ".join(f"{re.escape(name)}=({NUMBER})" for name in self.line))


def figures(*specs: str) -> tuple[Figure, ...]:
    """``"name >= 5000"``, ``"name"``: Figures."""
    return tuple(Figure(s.split(" ", 1)[0], s.split(" ", 1)[1] if " " in s else "") for s in specs)


PARTITION_FIGURES = (
    "partition_rare_word_p95_ms",
    "table_rare_word_p95_ms",
    "partition_search_p95_ms",
    "table_search_p95_ms",
    "partition_delete_s",
    "table_delete_s",
    "partition_freed_mb",
    "table_freed_mb",
)

BENCHES: tuple[Bench, ...] = (
    Bench(
        "attach",
        figures("attach_overhead_ratio <= 1.02", "attach_rows_per_s >= 20000"),
        ("attach_overhead_ratio", "attach_rows_per_s"),
        "the attach client's cost to a TRL script, and the rows a second a live server stores from its spool",
        needs=("postgres",),
        note="attach_rows_per_s's goal of 20,000 was set before the rollouts' text index (migration 0038): a raw COPY "
        "of short rows into the table with it stores about 11,500 a second here since migration 0046 (5,400 before: "
        "bench.ingest), the ceiling of any path",
    ),
    Bench(
        "capture_overhead",
        figures("capture_overhead_ratio <= 1.02", "token_capture_overhead_ratio <= 1.10"),
        ("token_capture_overhead_ratio",),
        "plain GRPOTrainer against our capture (default token sample; every group's tokens)",
    ),
    Bench(
        "sandbox_overhead",
        figures("sandbox_roundtrip_ms <= 0.1", "pipe_roundtrip_ms", "sandbox_overhead_ratio <= 1.15"),
        ("sandbox_overhead_ratio",),
        "a reward in process against the persistent sandboxed worker",
        note="sandbox_roundtrip_ms's goal of 0.1 ms lies under the floor of any process boundary for its batch (64 "
        "completions of 2 KB, 128 KB sent): pipe_roundtrip_ms, the same batch through a plain pipe with msgpack and no "
        "isolation or checks, is that floor",
    ),
    Bench(
        "code_reward",
        figures("code_tests_per_s >= 100"),
        ("code_tests_per_s",),
        "code_tests on batches of 64 demo Python tasks, 4 tests each",
    ),
    Bench(
        "dataset_import",
        figures("dataset_import_ratio <= 1.5", "peak_mb"),
        ("dataset_import_ratio", "peak_mb"),
        "a 1M-row JSONL through the project's import against datasets.load_dataset",
    ),
    Bench(
        "ingest",
        figures(
            "ingest_rows_per_s >= 50000",
            "copy_ratio >= 0.5",
            "realistic_rows_per_s >= 1000",
            "realistic_copy_ratio >= 0.5",
            "realistic_bare_copy_rows_per_s",
        ),
        ("ingest_rows_per_s", "copy_ratio", "realistic_rows_per_s", "realistic_copy_ratio"),
        "1M short and 50k R1-length completions from an event log into PostgreSQL, text index on, against a raw COPY "
        "of the same rows",
        needs=("postgres",),
        note="the goals of 50,000 and 1,000 rows a second were set before the text index (migration 0038): a raw COPY "
        "of the same rows into the same table reaches about 11,500 short and 550 realistic ones a second with it "
        "since migration 0046 (realistic_bare_copy_rows_per_s: without it); the ingest's own cost is what copy_ratio "
        "measures",
    ),
    Bench(
        "attach_import",
        figures("import_rows_per_s", "trl_rows_per_s", "verl_rows_per_s"),
        ("import_rows_per_s", "trl_rows_per_s", "verl_rows_per_s"),
        "200,000 completions as TRL's completions tables and verl's rollout dumps, read by the importers",
    ),
    Bench(
        "browse",
        figures("browse_p95_ms <= 50"),
        ("browse_p95_ms",),
        "p95 of the completion browser's queries on 10M completions of one run in PostgreSQL",
        needs=("postgres",),
    ),
    Bench(
        "search",
        figures("search_p95_ms <= 200", "store_bytes_ratio <= 0.5"),
        ("search_p95_ms", "store_bytes_ratio"),
        "p95 of indexed text search's first page on 1M realistic completions (R1-like lengths), on PostgreSQL and "
        "SQLite, and the rollouts table's bytes on disk over its raw text",
        needs=("postgres",),
        note="SQLite's store measured since migration 0046 (completions compressed, its trigram index without "
        "positions); before it, 2.75",
    ),
    Bench(
        "review",
        figures("review_next_p95_ms <= 100"),
        ("review_next_p95_ms",),
        "p95 of a review queue handing over its next rollout (taken, then read with its group) on 1M realistic "
        "completions, beside the rollout browser's first page",
        needs=("postgres",),
    ),
    Bench(
        "partitions",
        figures(*PARTITION_FIGURES),
        PARTITION_FIGURES,
        "a search within one run and a run's delete, its rows in a partition of its own against the same rows in "
        "one table with other runs' (PostgreSQL, runs.partitions)",
        needs=("postgres",),
    ),
    Bench(
        "live_latency",
        figures("live_p95_ms <= 1000"),
        ("live_p95_ms",),
        "an event from the run's log to 50 server-sent event clients, through the supervisor and Redis",
    ),
    Bench(
        "start_latency",
        figures("start_answer_p95_ms <= 300", "check_p50_s"),
        ("start_answer_p95_ms", "check_p50_s"),
        "POST /api/runs of a run whose reward is the user's code, answered as checking, against the check a worker of "
        "the checks queue then makes (what a Start used to wait for)",
    ),
    Bench(
        "upload_stress",
        figures("upload_stress_p95_ms <= 300", "web_peak_mb <= 300"),
        ("upload_stress_p95_ms", "web_peak_mb"),
        "a page's latency and the web process's memory while three hostile 100 MB uploads are refused",
    ),
    Bench(
        "page_weight",
        figures("run_page_kb <= 1200", "run_page_ms <= 1000"),
        ("run_page_kb", "run_page_ms"),
        "the run page of a run with 2,000 steps, cold, in chromium",
        needs=("chromium",),
    ),
    Bench(
        "replay",
        figures("replay_rows_per_s >= 5000"),
        ("replay_rows_per_s",),
        "stored completions re-scored by the reward replay (math-verify accuracy, think_format) into advantages",
    ),
    Bench(
        "eval_overhead",
        figures("eval_cost_ratio"),
        ("eval_cost_ratio",),
        "extra wall time per eval completion against training time per completion",
    ),
    Bench(
        "ray_scale",
        figures("ray_overhead_ratio >= 0.95", "ray_weak_scaling >= 1.8"),
        ("ray_overhead_ratio", "ray_weak_scaling"),
        "the training program on a local Ray head against local processes and a DDP pair",
        needs=("ray",),
        note=(
            "ray_weak_scaling 1.8 is out of reach of any 2 ranks in lockstep on 2 cores (a DDP pair without Ray "
            "reaches 1.68; docs/bench.md, bench.ray_scale). Its quick mode cannot be seconds: it still starts a Ray head and "
            "five training runs, on the smallest batch"
        ),
        quick_ci=(
            "its quick mode takes about 3.5 minutes of CI's 2 cores (a Ray head and five training runs), which CI's "
            "90-minute limit cannot spare: run `python -m bench --quick ray_scale`"
        ),
    ),
    Bench(
        "vllm_cpu",
        figures("vllm_cpu_tokens_ratio", "vllm_cpu_step_ratio"),
        ("vllm_cpu_tokens_ratio", "vllm_cpu_step_ratio"),
        "vLLM's CPU build against transformers' generate, generating and training",
        needs=("vllm_cpu",),
        quick_ci=(
            "needs vLLM's CPU environment: tests/bench/test_vllm_cpu_bench_runs_quick.py runs it in CI's vLLM lane "
            "(GRPO_TEST_VLLM_CPU_PYTHON)"
        ),
    ),
    Bench(
        "recipe_overhead",
        figures("recipe_overhead_ratio <= 1.05"),
        ("recipe_overhead_ratio",),
        "a 3-stage recipe against the same stages started by hand",
        note="its quick mode cannot be seconds: six stages, each a training or sampling process a worker starts",
        quick_ci=(
            "its quick mode takes about 2 minutes of CI's 2 cores (six stages a worker starts), which CI's 90-minute "
            "limit cannot spare: run `python -m bench --quick recipe_overhead`"
        ),
    ),
    Bench(
        "gpu_smoke",
        figures("vllm_step_speedup"),
        ("vllm_step_speedup",),
        "TRL with HF generate against vLLM colocate, vLLM server mode, verl and GPU telemetry, on one GPU",
        needs=("gpu",),
        quick_ci=(
            "needs a CUDA GPU, which CI lacks; its CPU side is tested by tests/verl/test_gpu_smoke_script.py "
            "and tests/workers/test_gpu_paths.py"
        ),
        command=("bash", "bench/gpu_smoke.sh"),
    ),
)
BY_NAME = {b.name: b for b in BENCHES}


# --- a bench's command line ----------------------------------------------------------------------------------------


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None, **quick) -> argparse.Namespace:
    """``parser``'s arguments, plus ``--quick``: the same code path with ``quick``'s small values as the defaults
    (an argument given explicitly still wins)."""
    shown = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in quick.items())
    parser.add_argument("--quick", action="store_true", help=f"the same path on small data, in seconds: {shown}")
    if "--quick" in (sys.argv[1:] if argv is None else argv):
        parser.set_defaults(**quick)
    return parser.parse_args(argv)


# --- running one and reading what it printed --------------------------------------------------------------------


@dataclass
class Result:
    bench: str
    returncode: int
    seconds: float
    cpu_seconds: float = 0.0  # its processes' CPU time (those waited for): on a loaded machine, the steadier figure
    values: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    output: str = ""  # stdout and stderr, the tail


def read_values(stdout: str) -> dict[str, float]:
    """Every ``name=<number>`` in the output, the last one of each name."""
    return {m[1]: float(m[2]) for m in re.finditer(rf"(?<![\w.])([a-z][a-z0-9_]*)=({NUMBER})(?![\w.])", stdout)}


def check(bench: Bench, returncode: int, stdout: str) -> list[str]:
    """What is wrong with a run of ``bench``: its exit status, a last line not in the documented form, a figure
    missing; empty when nothing is."""
    problems = []
    if returncode != 0:
        problems.append(f"{bench.name} exited with status {returncode}")
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if not bench.last_line.fullmatch(last):
        problems.append(f"{bench.name}'s last line is {last!r}, not {' '.join(f'{n}=<number>' for n in bench.line)}")
    values = read_values(stdout)
    missing = [f.name for f in bench.figures if f.name not in values]
    if missing:
        problems.append(f"{bench.name} printed no {', '.join(missing)}")
    return problems


def run(bench: Bench, *extra: str, env: dict | None = None, timeout: float | None = None, echo=False) -> Result:
    """``bench`` run to its end in a process of its own from the repository root, checked; ``echo``: its output
    shown as it goes, too."""
    started, cpu = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(
        bench.argv(*extra),
        cwd=ROOT,
        env=env if env is not None else os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    kept: dict[str, list[str]] = {"stdout": [], "stderr": []}

    def read(name: str, stream, shown) -> None:
        for line in stream:
            kept[name].append(line)
            if echo:
                shown.write(line)
                shown.flush()

    readers = [
        threading.Thread(target=read, args=("stdout", proc.stdout, sys.stdout), daemon=True),
        threading.Thread(target=read, args=("stderr", proc.stderr, sys.stderr), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        kept["stderr"].append(f"\n{bench.name}: stopped after {timeout:.0f} s\n")
    for reader in readers:
        reader.join(timeout=10)
    stdout, stderr = "".join(kept["stdout"]), "".join(kept["stderr"])
    values = read_values(stdout)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Result(
        bench=bench.name,
        returncode=proc.returncode,
        seconds=time.monotonic() - started,
        cpu_seconds=used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime,
        values={f.name: values[f.name] for f in bench.figures if f.name in values},
        problems=check(bench, proc.returncode, stdout),
        output=(stdout[-3000:] + "\n" + stderr[-3000:]).strip(),
    )
