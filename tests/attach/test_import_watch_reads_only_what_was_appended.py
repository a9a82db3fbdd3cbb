"""A watched folder is read for what it gained, not whole again: verl's file-logger log from where the last read
stopped, each dump once (its kind told once, by its first line), TRL's trainer_state.json only when it changed. The
child that reads counts the bytes it read; the record keeps the last read's count."""

import json
import os
import time

import pandas as pd
import pytest

from runs.attach.importing import run_import, run_import_poll
from runs.models import RunImport, StepMetric

pytestmark = pytest.mark.django_db


def _age(path, seconds=60):
    then = time.time() - seconds
    os.utime(path, (then, then))


def _log_line(step):
    return (json.dumps({"step": step, "data": {"actor/pg_loss": -0.001 * step, "padding": "x" * 200}}) + "\n").encode()


def _bytes_read(run) -> int:
    return RunImport.objects.get(run=run).state["bytes_read"]


def test_a_watched_verl_folder_reads_only_the_lines_appended_to_its_log(owner, root):
    folder = root / "verl"
    folder.mkdir()
    for step in (1, 2):
        lines = [{"input": f"p{i // 2}", "output": f"o{i}", "gts": "1", "score": float(i % 2)} for i in range(4)]
        (folder / f"{step}.jsonl").write_text("".join(json.dumps({**line, "step": step}) + "\n" for line in lines))
        _age(folder / f"{step}.jsonl")
    log = folder / "experiment.jsonl"
    log.write_bytes(b"".join(_log_line(step) for step in range(1, 501)))  # a long run's log
    run = run_import(owner=owner, path="verl", watch=True)
    assert StepMetric.objects.filter(run=run).count() == 500

    assert run_import_poll(run_id=run.pk)  # nothing new: nothing read
    assert _bytes_read(run) == 0

    appended = _log_line(501)
    with open(log, "ab") as fh:
        fh.write(appended)
    assert run_import_poll(run_id=run.pk)
    assert _bytes_read(run) == len(appended)  # the new line, not the 500 before it nor the dumps
    assert StepMetric.objects.get(run=run, step=501).metrics["loss"] == pytest.approx(-0.501)

    with open(log, "ab") as fh:
        fh.write(appended[:20])  # verl is writing the next line: it waits for its newline
    assert run_import_poll(run_id=run.pk)
    assert _bytes_read(run) == 20 and not StepMetric.objects.filter(run=run, step=502).exists()


def test_a_watched_trl_folder_reads_its_trainer_state_only_when_it_changed(owner, root):
    out = root / "trl"
    (out / "completions").mkdir(parents=True)
    table = {
        "step": [1] * 2,
        "prompt": ["p", "p"],
        "completion": ["a", "b"],
        "r": [1.0, 0.0],
        "advantage": [0.7, -0.7],
    }
    pd.DataFrame(table).to_parquet(out / "completions" / "completions_00001.parquet")
    _age(out / "completions" / "completions_00001.parquet")
    state = {"max_steps": 10, "logging_steps": 1, "log_history": [{"step": s, "loss": 0.1 * s} for s in range(1, 300)]}
    (out / "trainer_state.json").write_text(json.dumps(state))
    run = run_import(owner=owner, path="trl", watch=True)
    assert StepMetric.objects.filter(run=run).count() == 299

    assert run_import_poll(run_id=run.pk)
    assert _bytes_read(run) == 0  # the table read already, the state unchanged

    state["log_history"].append({"step": 300, "loss": 30.0})
    (out / "trainer_state.json").write_text(json.dumps(state))
    assert run_import_poll(run_id=run.pk)
    assert _bytes_read(run) == (out / "trainer_state.json").stat().st_size
    assert StepMetric.objects.get(run=run, step=300).metrics["loss"] == 30.0
