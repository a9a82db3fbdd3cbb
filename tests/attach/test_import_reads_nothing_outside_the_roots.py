"""The files an import reads stay under the import folders whatever is done to them while it reads: a dump or a
folder swapped for a link after the path was checked (the swap made at the point between the app's checks and the
converter's reads) is refused, as is a hard link to a file outside; nothing outside is read and nothing is stored."""

import json
import os
import shutil

import pytest

from runs.attach import importing
from runs.models import Rollout, Run, RunImport
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db

SECRET = "the secret outside the import folders"


def _dump(folder, step, completion="o"):
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        {"input": f"p{i // 2}", "output": f"{completion}{i}", "gts": "1", "score": float(i % 2), "step": step}
        for i in range(4)
    ]
    (folder / f"{step}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture
def places(settings, tmp_path):
    """(the import root with a verl dump folder in it, a folder outside the root holding a secret dump)."""
    root = tmp_path / "imports"
    _dump(root / "dumps", 1)
    _dump(root / "dumps", 2)
    outside = tmp_path / "outside"
    _dump(outside, 1, SECRET)
    _dump(outside, 2, SECRET)
    settings.GRPO_IMPORT_ROOTS = [root]
    return root, outside


def _swap_after_the_checks(monkeypatch, swap):
    """Make ``swap`` happen once the app has checked the path, before the converter reads it."""
    convert = importing.convert

    def swapped(*args, **kwargs):
        swap()
        return convert(*args, **kwargs)

    monkeypatch.setattr(importing, "convert", swapped)


def _refused(answer, *words):
    assert answer.status_code == 400, answer.content
    error = " ".join(answer.json()["errors"])
    for word in words:
        assert word in error, (word, error)
    assert SECRET not in error
    assert not Run.objects.exists() and not RunImport.objects.exists()
    assert not Rollout.objects.filter(completion__startswith=SECRET).exists()


def _post(owner, path):
    return api_client(owner).post("/api/runs/import", {"path": path, "source": "verl"}, content_type="application/json")


def test_a_dump_swapped_for_a_link_after_the_check_is_refused(owner, places, monkeypatch):
    root, outside = places

    def swap():
        (root / "dumps" / "2.jsonl").unlink()
        os.symlink(outside / "2.jsonl", root / "dumps" / "2.jsonl")

    _swap_after_the_checks(monkeypatch, swap)
    _refused(_post(owner, "dumps"), "2.jsonl", "link")


def test_a_folder_swapped_for_a_link_after_the_check_is_refused(owner, places, monkeypatch):
    root, outside = places

    def swap():
        shutil.rmtree(root / "dumps")
        os.symlink(outside, root / "dumps")

    _swap_after_the_checks(monkeypatch, swap)
    _refused(_post(owner, "dumps"), "link")


def test_a_hard_link_to_a_file_outside_is_refused(owner, places):
    root, outside = places
    (root / "dumps" / "2.jsonl").unlink()
    os.link(outside / "2.jsonl", root / "dumps" / "2.jsonl")
    _refused(_post(owner, "dumps"), "2.jsonl", "hard link")


def test_the_same_dumps_without_links_import(owner, places):
    answer = _post(owner, "dumps")
    assert answer.status_code == 201, answer.content
    assert Rollout.objects.count() == 8 and not Rollout.objects.filter(completion__startswith=SECRET).exists()


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_trl_output_dir_holding_a_link_to_a_table_outside_is_refused(owner, settings, tmp_path, trl_output, link):
    # TRL's importer opens its files the same way: a completions table linked in from outside is refused by name
    root, outside = tmp_path / "imports", tmp_path / "outside"
    shutil.copytree(trl_output.output_dir, root / "trl")
    settings.GRPO_IMPORT_ROOTS = [root]
    table = sorted((root / "trl" / "completions").glob("completions_*.parquet"))[-1]
    outside.mkdir()
    shutil.move(table, outside / table.name)
    (os.symlink if link == "symbolic" else os.link)(outside / table.name, table)
    answer = api_client(owner).post(
        "/api/runs/import", {"path": "trl", "source": "trl"}, content_type="application/json"
    )
    _refused(answer, table.name, "hard link" if link == "hard" else "link")
    table.unlink()
    shutil.copy(outside / table.name, table)  # the same table as a file of its own imports
    answer = api_client(owner).post(
        "/api/runs/import", {"path": "trl", "source": "trl"}, content_type="application/json"
    )
    assert answer.status_code == 201, answer.content
