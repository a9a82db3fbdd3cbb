"""How fast do the importers read a run's files? TRL's completions tables and verl's rollout dumps of synthetic R1-style
completions (bench.synthetic: three reward functions, G=8, 1024 completions a step), read by runs.attach.importers
into event-log events, as an import or a watched folder does before storing them.

    python -m bench.attach_import [--rows 200000] [--rounds 3]

The tables are written as TRL's GRPOTrainer.log writes them (a pandas frame: step, prompt, completion, a column per
reward function, advantage; ``to_parquet``), the dumps as verl's RayPPOTrainer._write_generations does (``json.dumps``
a line: input, output, gts, score, step, the reward-info keys). Only the reading is timed (the database side is
bench.ingest's). The last line is ``import_rows_per_s=<the slower of the two, median of the rounds>
trl_rows_per_s=<x> verl_rows_per_s=<y>``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.registry import parse_args


def write_files(root: Path, rows: int) -> None:
    import pandas as pd

    from bench.synthetic import REWARD_NAMES, rollout_events

    trl, verl = root / "trl" / "completions", root / "verl"
    trl.mkdir(parents=True)
    verl.mkdir()
    for event in rollout_events(rows):
        if event["type"] != "rollouts":
            continue
        step, batch = event["step"], event["rows"]
        table = {
            "step": [step] * len(batch),
            "prompt": [r["prompt"] for r in batch],
            "completion": [r["completion"] for r in batch],
            **{name: [r["rewards"][k] for r in batch] for k, name in enumerate(REWARD_NAMES)},
            "advantage": [r["advantage"] for r in batch],
        }
        pd.DataFrame(table).to_parquet(trl / f"completions_{step:05d}.parquet")
        with open(verl / f"{step}.jsonl", "w") as fh:
            for r in batch:
                line = {
                    "input": r["prompt"],
                    "output": r["completion"],
                    "gts": "42",
                    "score": r["reward"],
                    "step": step,
                    **{name: r["rewards"][k] for k, name in enumerate(REWARD_NAMES)},
                    "uid": f"{step}-{r['group']}",
                }
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parse_args(parser, None, rows=2000, rounds=1)

    from runs.attach.importers import trl, verl

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_files(root, args.rows)
        speeds: dict[str, list[float]] = {"trl": [], "verl": []}
        for _ in range(args.rounds):
            for name, read in (
                ("trl", lambda: trl.convert(root / "trl")),
                ("verl", lambda: verl.convert(root / "verl")),
            ):
                start = time.perf_counter()
                converted = read()
                seconds = time.perf_counter() - start
                assert converted.rows == args.rows, (name, converted.rows)
                speeds[name].append(args.rows / seconds)
                print(f"{name}: {args.rows} rows in {seconds:.2f} s", flush=True)
    trl_speed, verl_speed = statistics.median(speeds["trl"]), statistics.median(speeds["verl"])
    print(
        f"import_rows_per_s={min(trl_speed, verl_speed):.0f} trl_rows_per_s={trl_speed:.0f} verl_rows_per_s={verl_speed:.0f}"
    )


if __name__ == "__main__":
    main()
