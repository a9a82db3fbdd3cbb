"""``python -m bench NAME``: runs the bench, writes the table (JSON and markdown) and, with --write-docs, the manual's
page from it; a bench run earlier and not now keeps its row."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.registry import ROOT


def test_it_runs_the_named_bench_and_writes_the_table_keeping_earlier_rows(tmp_path):
    out, docs = tmp_path / "out", tmp_path / "benchmarks.md"
    out.mkdir()
    earlier = {"bench": "replay", "command": "python -m bench.replay", "mode": "full", "status": "ok",
               "date": "2026-01-02 03:04 UTC", "seconds": 9.0, "cpu_seconds": 9.0, "machine": "2 CPUs, load 0.1",
               "problems": [], "note": "", "output": "",
               "figures": [{"name": "replay_rows_per_s", "goal": ">= 5000", "value": 4078.0, "met": False}]}  # fmt: skip
    (out / "results.json").write_text(json.dumps({"benches": [earlier]}))
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "GRPO_DATA_DIR")}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "attach_import", "--quick", "--args", "attach_import=--rows 3000",
         "--out", str(out), "--write-docs", "--docs", docs],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    rows = {e["bench"]: e for e in json.loads((out / "results.json").read_text())["benches"]}
    ran = rows["attach_import"]
    assert (ran["status"], ran["mode"], ran["problems"]) == ("ok", "quick --rows 3000", [])
    assert "3000 " in done.stdout or "3,000" in done.stdout  # the bench itself took the size
    assert [f["name"] for f in ran["figures"]] == ["import_rows_per_s", "trl_rows_per_s", "verl_rows_per_s"]
    assert all(f["value"] > 0 and f["goal"] == "" and f["met"] is None for f in ran["figures"])
    assert rows["replay"] == earlier  # not run now: kept as it was
    assert rows["browse"]["status"] == "not run" and rows["browse"]["problems"] == ["not run yet"]

    table = (out / "results.md").read_text()
    assert "| `replay` | `replay_rows_per_s` | >= 5000 | 4,078 | **no** | 2026-01-02 03:04 UTC, full" in table
    assert "| `attach_import` | `import_rows_per_s` | none |" in table
    assert ", quick --rows 3000, " in table  # the row says what it ran with
    page = docs.read_text()
    assert page.startswith("# Benchmarks\n") and table in page


def test_arguments_for_a_bench_it_does_not_know_are_refused_by_name(tmp_path):
    for spec, said in (("nope=--rows 1", "'nope=--rows 1'"), ("search", "'search'"), ("search=--rows '1", "quotation")):
        done = subprocess.run(
            [sys.executable, "-m", "bench", "--no-run", "--args", spec, "--out", str(tmp_path)],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert not (tmp_path / "results.json").exists()
