"""One file, one run, by every route (issue 43, item 3): a config over the size limit (runs.safe_yaml.MAX_BYTES) is
refused whole, naming its size and the limit, by POST /api/runs, `grpo-web submit`, the import page's upload and its
textarea; none cuts it and trains on what came before the cut. A file under the limit is read to its last line."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from runs.accounts.services import token_create
from runs.lifecycle.trl_yaml import parse_run_yaml
from runs.models import Run
from runs.safe_yaml import MAX_BYTES
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db

BASE_DIR = Path(__file__).resolve().parents[2]
HEAD = "model_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [digit_ratio]\n"
TAIL = "learning_rate: 3.0e-05\nmax_steps: 7\n"  # the settings past the cut the old routes made


def cli_submit(web_server: str, token: str, path) -> subprocess.CompletedProcess:
    """``grpo-web submit PATH`` as a user runs it, against the live server with this token."""
    return subprocess.run(
        [sys.executable, "-m", "grpo_web.client", "submit", str(path)],
        env={"GRPO_WEB_URL": web_server, "GRPO_WEB_TOKEN": token, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BASE_DIR,
    )


def config_of(size: int) -> str:
    """A valid config of ``size`` bytes: its settings come after a long comment, at the very end."""
    filler = size - len(HEAD) - len(TAIL)
    lines = "".join("#" + "x" * 98 + "\n" for _ in range(filler // 100))
    return HEAD + lines + "#" * (filler - len(lines) - 1) + "\n" + TAIL


def refusal(size: int) -> str:
    return f"the config is {size:,} bytes, over the limit of {MAX_BYTES:,} bytes; nothing of it was read"


def test_a_file_just_under_the_limit_is_read_to_its_last_line(owner, dataset_version):
    text = config_of(MAX_BYTES)
    assert len(text.encode()) == MAX_BYTES
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == []
    assert imported.config["learning_rate"] == 3e-05 and imported.config["max_steps"] == 7


def test_the_shared_import_refuses_a_file_one_byte_over_with_its_size_and_the_limit(owner, dataset_version):
    imported = parse_run_yaml(config_of(MAX_BYTES + 1), owner=owner)
    assert imported.errors == [refusal(MAX_BYTES + 1)]


def test_the_api_refuses_a_valid_two_megabyte_file_whole(owner, dataset_version):
    text = config_of(2_000_000)
    response = api_client(owner).post("/api/runs", {"yaml": text}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"] == [refusal(2_000_000)]
    assert not Run.objects.exists()


def test_the_api_refuses_the_same_keys_as_json_over_the_limit(owner, dataset_version):
    config = {"model_name_or_path": "tiny", "dataset_name": "arithmetic", "reward_funcs": ["digit_ratio"]}
    config["run_name"] = "x" * MAX_BYTES
    response = api_client(owner).post("/api/runs", {"config": config}, content_type="application/json")
    assert response.status_code == 400
    assert re.fullmatch(
        rf"the config is [\d,]+ bytes, over the limit of {MAX_BYTES:,} bytes; nothing of it was read",
        response.json()["errors"][0],
    )
    assert not Run.objects.exists()


def test_a_json_body_past_djangos_limit_names_its_size_and_the_config_limit(owner, settings):
    body = json.dumps({"yaml": config_of(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 100)})
    response = api_client(owner).post("/api/runs", body, content_type="application/json")
    assert response.status_code == 413
    error = response.json()["errors"][0]
    assert f"it is {len(body.encode()):,} bytes" in error and f"at most {MAX_BYTES:,} bytes" in error


def test_the_import_page_refuses_an_upload_over_the_limit_unread(owner_client, dataset_version):
    text = config_of(MAX_BYTES + 10)
    response = owner_client.post(
        reverse("run_import"), {"file": SimpleUploadedFile("big.yaml", text.encode(), "application/yaml")}
    )
    assert response.status_code == 400
    assert refusal(MAX_BYTES + 10) in response.content.decode()
    assert 'value="3e-05"' not in response.content.decode()


def test_the_import_pages_textarea_refuses_a_paste_over_the_limit(owner_client, dataset_version):
    response = owner_client.post(reverse("run_import"), {"yaml": config_of(MAX_BYTES + 10)})
    assert response.status_code == 400
    assert refusal(MAX_BYTES + 10) in response.content.decode()


def test_a_paste_past_the_forms_own_limit_is_refused_by_size_on_the_import_page(owner, dataset_version, settings):
    """Past DATA_UPLOAD_MAX_MEMORY_SIZE the CSRF check cannot read the form: the import page still names the size."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    client.get(reverse("run_new"))
    token = client.cookies["csrftoken"].value
    text = config_of(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 100)
    response = client.post(reverse("run_import"), {"yaml": text, "csrfmiddlewaretoken": token})
    assert response.status_code == 400
    page = response.content.decode()
    assert "over the limit of 1,048,576 bytes" in page and 'id="import-errors"' in page


@pytest.mark.django_db(transaction=True)
def test_the_cli_refuses_a_file_over_the_limit_with_its_size_and_the_limit(
    web_server, owner, dataset_version, tmp_path
):
    _, token = token_create(owner=owner, name="cli", scope="write")
    path = tmp_path / "big.yaml"
    path.write_bytes(config_of(MAX_BYTES + 10).encode())
    done = cli_submit(web_server, token, path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"grpo-web: {refusal(MAX_BYTES + 10)}" in done.stderr.splitlines()
    assert not Run.objects.exists()
