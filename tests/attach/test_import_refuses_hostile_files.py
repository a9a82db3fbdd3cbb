"""Hostile imports: malformed, truncated and mistyped files, lines past the limit, paths and links out of the
import folders, bad options. Each is a 400 naming the file and the row or line (or the field), and nothing is
stored: no run, no import record."""

import json
import os
import shutil

import pandas as pd
import pytest
from grpo_web_protocol import verl_dump

from runs.models import Run, RunImport
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db

GOOD = {
    "step": [1] * 4,
    "prompt": ["p1"] * 2 + ["p2"] * 2,
    "completion": list("abcd"),
    "r": [1.0, 0.0, 1.0, 0.5],
    "advantage": [0.7, -0.7, 0.7, -0.7],
}


def _line(step, i, **extra):
    return json.dumps(
        {"input": f"p{i // 2}", "output": f"o{i}", "gts": "1", "score": float(i % 2), "step": step, **extra}
    )


def _trl(root, name, frame, *, good_first=True) -> str:
    folder = root / name / "completions"
    folder.mkdir(parents=True)
    if good_first:
        pd.DataFrame(GOOD).to_parquet(folder / "completions_00001.parquet")
    if isinstance(frame, bytes):
        (folder / "completions_00002.parquet").write_bytes(frame)
    else:
        pd.DataFrame(frame).to_parquet(folder / "completions_00002.parquet")
    return name


def _verl(root, name, text: str) -> str:
    folder = root / name
    folder.mkdir()
    (folder / "1.jsonl").write_text("\n".join(_line(1, i) for i in range(4)) + "\n")
    (folder / "2.jsonl").write_text(text)
    return name


def _post(owner, **body):
    return api_client(owner).post("/api/runs/import", body, content_type="application/json")


def _refused(answer, *words):
    assert answer.status_code == 400, answer.content
    error = " ".join(answer.json()["errors"])
    for word in words:
        assert word in error, (word, error)
    assert not Run.objects.exists() and not RunImport.objects.exists()


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (b"PAR1 this is not parquet", ["completions_00002.parquet", "not a readable parquet"]),
        ({**GOOD, "advantage": ["high", "low", "x", "y"]}, ["completions_00002.parquet", "advantage"]),
        ({**GOOD, "prompt": [1, 2, 3, 4]}, ["completions_00002.parquet: row 0", "'prompt'"]),
        ({**GOOD, "advantage": [0.1, None, 0.2, 0.3]}, ["completions_00002.parquet: row 1", "'advantage' is empty"]),
        ({k: v for k, v in GOOD.items() if k != "advantage"}, ["completions_00002.parquet", "'advantage' column"]),
        ({**GOOD, "step": [2, 2, -3, 2]}, ["completions_00002.parquet: row 2", "'step'"]),
        ({**GOOD, "prompt": ["a", "b", "c", "d"], "completion": list("abcd")[:4]}, []),  # 4 groups of 1: fine
    ],
)
def test_a_bad_trl_table_is_refused_naming_file_and_row(owner, root, frame, words):
    answer = _post(owner, path=_trl(root, "run", frame))
    if not words:
        assert answer.status_code == 201, answer.content
        return
    _refused(answer, *words)


def test_a_truncated_table_is_refused(owner, root):
    whole = root / "whole.parquet"
    pd.DataFrame(GOOD).to_parquet(whole)
    data = whole.read_bytes()
    whole.unlink()
    _refused(_post(owner, path=_trl(root, "run", data[: len(data) // 2])), "completions_00002.parquet")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (_line(2, 0) + "\n{not json\n", ["2.jsonl: line 2", "not JSON"]),
        ("[1, 2]\n", ["2.jsonl: line 1", "not a JSON object"]),
        (json.dumps({"input": "p", "output": "o"}) + "\n", ["2.jsonl: line 1", "'score'"]),
        (_line(2, 0).replace('"score": 0.0', '"score": "high"') + "\n", ["2.jsonl: line 1", "'score'"]),
        (_line(2, 0).replace('"output": "o0"', '"output": ["o"]') + "\n", ["2.jsonl: line 1", "'output'"]),
        (_line(2, 0).replace('"step": 2', '"step": 2.5') + "\n", ["2.jsonl: line 1", "'step'"]),
        (_line(2, 0) + "\n" + _line(3, 1) + "\n", ["2.jsonl", "several steps"]),
        ('{"a": ' * 100_000 + "\n", ["2.jsonl: line 1"]),
    ],
)
def test_a_bad_verl_dump_is_refused_naming_file_and_line(owner, root, text, words):
    _refused(_post(owner, path=_verl(root, "dumps", text)), *words)


def test_a_line_past_the_limit_is_refused(owner, root):
    line = _line(2, 0, pred="x" * verl_dump.MAX_LINE_BYTES) + "\n"
    _refused(_post(owner, path=_verl(root, "dumps", line)), "2.jsonl: line 1", "bytes")


def test_paths_and_links_out_of_the_import_folders_are_refused(owner, root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "1.jsonl").write_text(_line(1, 0) + "\n")
    _refused(_post(owner, path=str(outside)), "import folders")
    _refused(_post(owner, path="../outside"), "import folders")
    _refused(_post(owner, path="no-such-folder"), "does not exist")
    os.symlink(outside, root / "link")  # the folder itself a link out
    _refused(_post(owner, path="link"), "import folders")
    inside = root / "dumps"
    inside.mkdir()
    os.symlink(outside / "1.jsonl", inside / "1.jsonl")  # a file in it a link out
    _refused(_post(owner, path="dumps"), "1.jsonl", "link out of the import folders")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"options": {"reward_weights": "heavy"}}, ["options.reward_weights"]),
        ({"options": {"num_generations": 0}}, ["options.num_generations"]),
        ({"options": {"secret": 1}}, ["options.secret", "unknown"]),
        ({"source": "wandb"}, ["source"]),
        ({"options": {"reward_names": ["nope"]}}, ["completions_00001.parquet", "'nope'"]),
        ({"options": {"num_generations": 3}}, ["not whole groups of 3"]),
    ],
)
def test_bad_options_are_refused_naming_them(owner, root, body, words):
    shutil.rmtree(root / "run", ignore_errors=True)
    _refused(_post(owner, path=_trl(root, "run", GOOD), **body), *words)


def test_an_upload_of_another_kind_of_file_is_refused(owner, root, tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("hello")
    with open(bad, "rb") as fh:
        answer = api_client(owner).post("/api/runs/import/upload", {"files": [fh]})
    _refused(answer, "notes.txt")
