"""A Trackio project that TRL itself logged to (report_to="trackio", log_completions=True), imported: TRL's rows
and metrics as TRL logged them, read from Trackio's SQLite file without Trackio; and what is wrong with a project
named, nothing stored.

Trackio (0.43) pins pillow<13 and brings uvloop and httptools, so it is not in the project's environment:
``scripts/dev.sh install`` puts it beside it (``.venv/trackio-lib``), on PYTHONPATH for the training script only."""

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from runs.attach.importing import ImportRefused, run_import
from runs.models import Rollout, Run, StepMetric

pytestmark = pytest.mark.django_db

TRACKIO_LIB = Path(sys.prefix) / "trackio-lib"


@pytest.fixture(scope="module")
def trackio_run(tiny_model, tmp_path_factory):
    """(the project's .db, TRL's output_dir): the tiny model trained 2 steps by a plain TRL script logging to
    Trackio."""
    if not (TRACKIO_LIB / "trackio").is_dir():
        pytest.skip(f"Trackio is not beside the environment ({TRACKIO_LIB}): run bash scripts/dev.sh install")
    tmp = tmp_path_factory.mktemp("trackio")
    env = {
        **os.environ,
        "PYTHONPATH": str(TRACKIO_LIB),
        "TRACKIO_DIR": str(tmp / "trackio"),
        "HF_HUB_OFFLINE": "1",
        "TRACKIO_DATASET_ID": "",
    }
    script = Path(__file__).with_name("trackio_script.py")
    done = subprocess.run(
        [sys.executable, str(script), str(tiny_model), str(tmp / "out")],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return tmp / "trackio" / "grpo-trackio.db", tmp / "out"


@pytest.fixture
def roots(settings, trackio_run):
    settings.GRPO_IMPORT_ROOTS = [str(trackio_run[0].parent.parent)]


def table_rows(db: Path) -> list[tuple[int, dict]]:
    """The metrics rows of a project that hold a logged table (Trackio stores the JSON as text or bytes)."""
    with sqlite3.connect(db) as c:
        rows = [(i, json.loads(raw)) for i, raw in c.execute("SELECT id, metrics FROM metrics ORDER BY id")]
    return [
        (i, v) for i, v in rows if any(isinstance(x, dict) and x.get("_type") == "trackio.table" for x in v.values())
    ]


def _same(ours, theirs) -> bool:
    if ours is None:
        return theirs is None or (isinstance(theirs, float) and math.isnan(theirs))
    return ours == theirs


def test_a_trackio_project_imports_trls_rows_and_metrics(owner, roots, trackio_run):
    db, out = trackio_run
    run = run_import(owner=owner, path=str(db))
    assert run.origin == Run.Origin.IMPORTED and run.status == Run.Status.COMPLETED
    assert run.run_import.source == "trackio"
    # the rows: TRL's completions table, as TRL wrote it to its parquet files from the same DataFrame
    tables = sorted((out / "completions").glob("completions_*.parquet"))
    assert len(tables) == 2
    for path in tables:
        table = pd.read_parquet(path)
        step = int(table["step"][0])
        rows = list(Rollout.objects.filter(run=run, step=step).order_by("index"))
        assert len(rows) == len(table) == 8
        assert [r.prompt for r in rows] == list(table["prompt"])
        assert [r.completion for r in rows] == list(table["completion"])
        assert [r.advantage for r in rows] == table["advantage"].tolist()
        for k, name in enumerate(("digits", "has_answer")):
            assert all(_same(r.rewards[k], v) for r, v in zip(rows, table[name].tolist()))
        # the total uses the config's reward_weights, as TRL's reward does
        for row, (_, cells) in zip(rows, table.iterrows()):
            scored = [(cells[n], w) for n, w in (("digits", 1.0), ("has_answer", 0.5)) if not math.isnan(cells[n])]
            assert row.reward == pytest.approx(sum(v * w for v, w in scored))
    # Trackio holds three tables: the end of training's log writes step 2's batch again (its parquet file over the
    # first); stored once
    assert len(table_rows(db)) == 3
    assert Rollout.objects.filter(run=run).count() == 16
    assert run.reward_names == ["digits", "has_answer"]
    # the metrics: TRL's log_history, under TRL's names, at TRL's steps
    history = [e for e in json.loads((out / "log_history.json").read_text()) if "loss" in e]
    stored = {m.step: m for m in StepMetric.objects.filter(run=run)}
    assert sorted(stored) == [e["step"] for e in history] == [1, 2]
    for entry in history:
        metrics = stored[entry["step"]].metrics
        for name in ("loss", "reward", "reward_std", "rewards/digits/mean", "entropy"):
            assert metrics[name] == pytest.approx(entry[name])
    assert run.config["num_generations"] == 4 and run.config["learning_rate"] == 1e-3


def test_what_is_wrong_with_a_project_is_named_and_nothing_is_stored(owner, roots, trackio_run, tmp_path):
    db, _ = trackio_run
    folder = db.parent
    # a project with two runs: which one
    two = folder / "two-runs.db"
    two.write_bytes(db.read_bytes())
    with sqlite3.connect(two) as c:
        c.execute("UPDATE metrics SET run_name = 'other' WHERE id IN (SELECT id FROM metrics ORDER BY id LIMIT 3)")
    with pytest.raises(ImportRefused, match="2 runs .*'other'.*name the one"):
        run_import(owner=owner, path=str(two))
    assert run_import(owner=owner, path=str(two), options={"run": "tiny-run"}).rollouts.exists()
    with pytest.raises(ImportRefused, match="no run 'nope'"):
        run_import(owner=owner, path=str(two), options={"run": "nope"})
    # a table whose advantage is text: the metrics row and the column are named
    bad = folder / "bad-table.db"
    bad.write_bytes(db.read_bytes())
    row_id, values = table_rows(bad)[0]
    values["completions"]["_value"][3]["advantage"] = "high"
    with sqlite3.connect(bad) as c:
        c.execute("UPDATE metrics SET metrics = ? WHERE id = ?", (json.dumps(values), row_id))
    with pytest.raises(ImportRefused, match=rf"metrics row {row_id} \(completions\).*row 3.*'advantage'"):
        run_import(owner=owner, path=str(bad))
    # not a SQLite file, and a JSON that is not
    fake = folder / "fake.db"
    fake.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(ImportRefused, match="fake.db: not a"):
        run_import(owner=owner, path=str(fake))
    broken = folder / "broken-json.db"
    broken.write_bytes(db.read_bytes())
    with sqlite3.connect(broken) as c:
        c.execute("UPDATE metrics SET metrics = '{\"train/loss\": ' WHERE id = (SELECT MAX(id) FROM metrics)")
    with pytest.raises(ImportRefused, match=r"broken-json.db: metrics row \d+: not JSON"):
        run_import(owner=owner, path=str(broken))
    assert Run.objects.filter(owner=owner).count() == 1  # only the good import above
