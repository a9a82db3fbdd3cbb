"""Watch mode: a verl dump folder and a TRL completions folder that grow while the run writes them. Each read stores
only what is new, a dump still being written waits for the next read, a read repeated stores nothing twice, and the
run ends when the watch is stopped or the folder stays idle."""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from runs.attach.importing import run_import, run_import_poll, run_import_stop
from runs.models import Rollout, Run, RunImport, StepMetric

pytestmark = pytest.mark.django_db


def _age(path, seconds=60):
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_growing_verl_folder_is_followed(owner, root, verl_dumps):
    folder = root / "verl"
    folder.mkdir()
    shutil.copy(verl_dumps / "1.jsonl", folder / "1.jsonl")
    _age(folder / "1.jsonl")
    run = run_import(owner=owner, path="verl", watch=True)
    assert run.status == "running" and RunImport.objects.get(run=run).watching
    assert set(Rollout.objects.filter(run=run).values_list("step", flat=True)) == {1}

    # verl writes step 2 while the watch reads: half a file, just modified, waits for the next read; its file
    # logger has logged step 2 already
    whole = (verl_dumps / "2.jsonl").read_bytes()
    (folder / "2.jsonl").write_bytes(whole[: len(whole) // 2])
    with open(folder / "experiment.jsonl", "w") as fh:
        for step in (1, 2):
            fh.write(json.dumps({"step": step, "data": {"actor/pg_loss": -0.1 * step}}) + "\n")
    assert run_import_poll(run_id=run.pk)
    assert not Rollout.objects.filter(run=run, step=2).exists()
    assert StepMetric.objects.get(run=run, step=2).metrics["loss"] == pytest.approx(-0.2)
    (folder / "2.jsonl").write_bytes(whole)
    _age(folder / "2.jsonl")
    assert run_import_poll(run_id=run.pk)
    assert Rollout.objects.filter(run=run, step=2).count() == 6
    step2 = StepMetric.objects.get(run=run, step=2).metrics  # the dump's means join the log's metrics of the step
    assert "rewards/acc/mean" in step2 and step2["loss"] == pytest.approx(-0.2)
    assert run_import_poll(run_id=run.pk)  # nothing new: nothing stored twice
    assert Rollout.objects.filter(run=run).count() == 12 and StepMetric.objects.filter(run=run).count() == 2
    assert RunImport.objects.get(run=run).files == ["1.jsonl", "2.jsonl"]

    run_import_stop(run=run)
    run.refresh_from_db()
    assert run.status == "completed" and not run_import_poll(run_id=run.pk)


def test_a_watched_trl_folder_gains_tables_and_ends_when_idle(owner, root, trl_output, settings):
    tables = sorted((Path(trl_output.output_dir) / "completions").glob("*.parquet"))
    folder = root / "trl" / "completions"
    folder.mkdir(parents=True)
    run = run_import(owner=owner, path="trl", watch=True, options={"reward_weights": [1.0, 0.5]})
    assert not Rollout.objects.filter(run=run).exists()  # TRL has not logged yet
    for table in tables:
        shutil.copy(table, folder / table.name)
        _age(folder / table.name)
        assert run_import_poll(run_id=run.pk)
    assert sorted(set(Rollout.objects.filter(run=run).values_list("step", flat=True))) == [2, 3]
    settings.GRPO_IMPORT_WATCH_IDLE_S = 0
    assert not run_import_poll(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "completed" and not RunImport.objects.get(run=run).watching


def test_a_file_that_turns_bad_stops_the_watch_and_says_why(owner, root, verl_dumps):
    folder = root / "verl"
    folder.mkdir()
    shutil.copy(verl_dumps / "1.jsonl", folder / "1.jsonl")
    run = run_import(owner=owner, path="verl", watch=True)
    (folder / "2.jsonl").write_text(json.dumps({"input": "p"}) + "\n")
    _age(folder / "2.jsonl")
    assert not run_import_poll(run_id=run.pk)
    record = RunImport.objects.get(run=run)
    assert not record.watching and "2.jsonl: line 1" in record.error
    assert Run.objects.get(pk=run.pk).status == "failed"
