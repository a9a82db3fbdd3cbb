"""A `grpo-web export -o FILE` the server refuses (or whose stream is cut) writes nothing: no empty file where
there was none, and a file already there is left as it was; the refusal is printed."""

from pathlib import Path

import pytest

from runs.accounts.services import token_create
from tests.api.test_cli_client import cli

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_refused_export_leaves_no_file_and_keeps_an_old_one(web_server, owner, tmp_path, monkeypatch):
    # the installed command runs this checkout's client, not the one it was installed from
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    _, token = token_create(owner=owner, name="cli", scope="read")
    out = tmp_path / "rows.jsonl"
    refused = cli(web_server, token, "export", "999999", "-o", str(out))
    assert refused.returncode == 2 and "404" in refused.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []

    out.write_text("yesterday's rows\n")
    refused = cli(web_server, token, "export", "999999", "--filter", "step_min=2", "-o", str(out))
    assert refused.returncode == 2
    assert out.read_text() == "yesterday's rows\n" and list(tmp_path.iterdir()) == [out]
