"""A stand-in bench for tests/bench/test_the_quick_check_catches_a_broken_bench.py: a real bench's shape (its
figures on the last line, ``--quick`` through bench.registry.parse_args) that breaks as ``--break`` asks."""

from __future__ import annotations

import argparse
import sys

from bench.registry import parse_args


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--break", dest="broken", default="", choices=["", "check", "line", "renamed", "text", "tail"])
    args = parse_args(parser, None, rows=10)
    print(f"{args.rows} rows", flush=True)
    if args.broken == "check":  # its own check fails: it says why and stops, as upload_stress did
        print("latin.jsonl: expected a 400 naming 'line 3: not UTF-8 text (byte 15)'", file=sys.stderr)
        return 1
    if args.broken == "line":  # the figures, but not on the last line
        print(f"fake_rows_per_s={args.rows} fake_ratio=0.5")
        print("done")
        return 0
    if args.broken == "renamed":  # a figure under another name
        print(f"fake_rows_per_s={args.rows} fake_share=0.5")
        return 0
    if args.broken == "text":  # a value that is no number
        print("fake_rows_per_s=fast fake_ratio=0.5")
        return 0
    if args.broken == "tail":  # a figure missing from the line
        print(f"fake_rows_per_s={args.rows}")
        return 0
    print(f"fake_rows_per_s={args.rows} fake_ratio=0.5")
    return 0


if __name__ == "__main__":
    sys.exit(main())
