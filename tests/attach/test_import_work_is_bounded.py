"""An import's reading is bounded whatever the files hold: it runs in a child process under memory, CPU and
wall-clock limits, streams what it reads, refuses a Trackio project whose tables are views, and one user may watch
only so many folders at once. Each refusal is a 400 naming the file; nothing is stored."""

import json
import os
import resource
import sqlite3

import pytest

from runs.models import RunImport
from tests.attach.test_import_refuses_hostile_files import _post, _refused

pytestmark = pytest.mark.django_db


def _dumps(folder, steps=(1,), rows=4):
    folder.mkdir(parents=True, exist_ok=True)
    for step in steps:
        with open(folder / f"{step}.jsonl", "w") as fh:
            for i in range(rows):
                line = {"input": f"p{i // 2}", "output": f"o{i}", "gts": "1", "score": float(i % 2), "step": step}
                fh.write(json.dumps(line) + "\n")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_sparse_gigabyte_dump_is_refused_at_its_first_line_within_the_limits(owner, root, settings):
    _dumps(root / "dumps")
    with open(root / "dumps" / "2.jsonl", "wb") as fh:
        fh.truncate(1024**3)  # a gigabyte of zeros, one endless line, that takes no room on disk
    settings.GRPO_RUN_IMPORT_MEMORY_BYTES = 256 * 1024**2
    before = _peak_mb()
    _refused(_post(owner, path="dumps"), "2.jsonl: line 1", "more than")
    # the web process did not read the gigabyte (its peak grew far less), and the child read it under 256 MB
    assert _peak_mb() - before < 256


def test_a_trackio_project_whose_metrics_is_a_recursive_view_is_refused(owner, root):
    db = sqlite3.connect(root / "project.db")
    db.execute("CREATE TABLE configs (id INTEGER PRIMARY KEY, run_name TEXT, config TEXT)")
    db.execute(
        "CREATE VIEW metrics AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 2000000) "
        "SELECT x AS id, 'run' AS run_name, '{}' AS metrics FROM n"
    )
    db.commit()
    db.close()
    _refused(_post(owner, path="project.db"), "project.db", "'metrics' is a view")


def test_a_read_past_its_cpu_limit_is_stopped_naming_the_file(owner, root, settings):
    _dumps(root / "dumps", rows=60_000)  # seconds of CPU to convert
    settings.GRPO_RUN_IMPORT_CPU_SECONDS = 1
    _refused(_post(owner, path="dumps"), "dumps: reading stopped", "1 s of CPU")


def test_one_user_watches_only_so_many_folders(owner, root, settings):
    settings.GRPO_IMPORT_WATCH_PER_USER = 1
    _dumps(root / "a")
    _dumps(root / "b")
    assert _post(owner, path="a", watch=True).status_code == 201
    answer = _post(owner, path="b", watch=True)
    assert answer.status_code == 400 and "watch: you watch 1 folders already" in answer.json()["errors"][0]
    assert RunImport.objects.count() == 1


def test_a_dump_that_is_a_named_pipe_is_refused_not_waited_on(owner, root):
    # a pipe nobody writes would block a read forever: it is opened without waiting and refused by name
    _dumps(root / "dumps")
    os.mkfifo(root / "dumps" / "2.jsonl")
    _refused(_post(owner, path="dumps"), "dumps/2.jsonl: not a regular file")


def test_a_reading_child_is_stopped_by_the_wall_clock(owner, root, settings):
    # a wall bound shorter than the child's start: it is killed on the wall clock, whatever its CPU time
    _dumps(root / "dumps")
    settings.GRPO_RUN_IMPORT_WALL_SECONDS = 0.05
    _refused(_post(owner, path="dumps"), "dumps: reading took longer than 0.05 s, the limit")
