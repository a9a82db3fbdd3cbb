"""What does our import cost? A generated JSON-lines file imported by the project vs. read by ``datasets`` alone.

    python -m bench.dataset_import [--rows 1000000] [--rounds 3]   (from the repo root)

"project" is the real service, ``runs.datasets.services.dataset_import`` (sniffing, the UTF-8 check, a streaming read
in a child process with limits, vectorised validation, the Parquet file, the database rows), run against a fresh
SQLite database and data folder in a temporary directory; its peak is the larger of its own and its child's.
"datasets" is ``datasets.load_dataset("json", data_files=..., cache_dir=<fresh>)``, which reads the same file into
its Arrow cache. Each measurement runs in a process of its own, so its peak memory (``ru_maxrss``) is its own; the
variants alternate so drift of the machine hits both alike, and the file is read once beforehand so both find it in
the page cache. Only the call is timed, not the interpreter, Django or library start-up.

The last line is ``dataset_import_ratio=<project median / datasets median> peak_mb=<project peak RSS>``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a file (python bench/dataset_import.py): make `bench` importable
    sys.path.insert(0, str(ROOT))

from bench.registry import parse_args  # noqa: E402 (after the path is set)

VARIANTS = ("project", "datasets")


def generate(path: Path, rows: int, seed: int = 0) -> None:
    """Arithmetic prompts with answers, ~95 bytes a line."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as fh:
        for _ in range(rows):
            a, b = rng.randint(0, 999), rng.randint(0, 999)
            fh.write(
                json.dumps(
                    {
                        "prompt": f"What is {a} + {b}? Think step by step, then answer with a number.",
                        "answer": str(a + b),
                    }
                )
                + "\n"
            )


def measure(variant: str, data: Path, work: Path) -> dict:
    """One import in this process: {"seconds", "rows", "peak_mb"}."""
    import resource

    if variant == "project":
        import django

        django.setup()
        from django.contrib.auth import get_user_model

        from runs.datasets.services import dataset_import

        user, _ = get_user_model().objects.get_or_create(username="bench")
        start = time.perf_counter()
        version = dataset_import(owner=user, name="bench", path=data, source_name=data.name)
        seconds, rows = time.perf_counter() - start, version.row_count
    else:
        import datasets

        datasets.disable_progress_bars()
        cache = tempfile.mkdtemp(dir=work, prefix="hf-cache-")
        start = time.perf_counter()
        ds = datasets.load_dataset("json", data_files=str(data), cache_dir=cache, split="train")
        seconds, rows = time.perf_counter() - start, len(ds)
    # the project reads the file in a child process (runs.datasets.isolated): its peak counts too
    peak = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    )
    return {"seconds": seconds, "rows": rows, "peak_mb": peak / 1024}


def run_variant(variant: str, data: Path, work: Path, env: dict) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.dataset_import", "--measure", variant, "--data", str(data), "--work", str(work)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--measure", choices=VARIANTS, help=argparse.SUPPRESS)  # a child process: one measurement
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parse_args(parser, argv, rows=20_000, rounds=1)
    if args.measure:
        print(json.dumps(measure(args.measure, args.data, args.work)))
        return 0

    with tempfile.TemporaryDirectory(prefix="grpo-bench-") as tmp:
        work = Path(tmp)
        data = work / "rows.jsonl"
        generate(data, args.rows)
        size_mb = data.stat().st_size / 1024**2
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(GRPO_DATA_DIR=str(work / "data"), DJANGO_SETTINGS_MODULE="grpo_web.settings", PYTHONPATH=str(ROOT))
        subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True)
        data.read_bytes()  # into the page cache, for both variants alike

        results: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for r in range(args.rounds):
            for variant in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
                result = run_variant(variant, data, work, env)
                assert result["rows"] == args.rows, result
                results[variant].append(result)
                print(
                    f"round {r + 1}/{args.rounds} {variant:<9} {result['seconds']:6.2f} s  "
                    f"peak {result['peak_mb']:6.0f} MB",
                    flush=True,
                )

    medians = {v: statistics.median(r["seconds"] for r in results[v]) for v in VARIANTS}
    peaks = {v: max(r["peak_mb"] for r in results[v]) for v in VARIANTS}
    print()
    print(f"{args.rows} rows, {size_mb:.0f} MB of JSON lines, {args.rounds} rounds")
    for v in VARIANTS:
        print(
            f"{v:<9} median {medians[v]:6.2f} s  ({args.rows / medians[v] / 1e6:.2f} M rows/s)  "
            f"peak RSS {peaks[v]:6.0f} MB"
        )
    print(f"dataset_import_ratio={medians['project'] / medians['datasets']:.3f} peak_mb={peaks['project']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
