"""`grpo-web import` against a live server: a verl dump folder on the server (under the import folder), TRL's
completions tables uploaded from here, and a path out of the import folders refused with the server's message."""

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from runs.accounts.services import token_create
from runs.models import Rollout, Run

pytestmark = [pytest.mark.django_db(transaction=True)]

CLI = str(Path(sys.executable).with_name("grpo-web"))
CHECKOUT = str(Path(__file__).resolve().parents[2])  # the client of this checkout, wherever the venv was installed from


def cli(web_server, token, *args) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (CHECKOUT, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "GRPO_WEB_URL": web_server, "GRPO_WEB_TOKEN": token, "PYTHONPATH": path}
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=120)


def test_import_a_server_folder_and_an_upload(web_server, owner, verl_dumps, trl_output, tmp_path):
    _, token = token_create(owner=owner, name="cli", scope="write")
    name = f"verl-{uuid.uuid4().hex[:8]}"
    folder = Path(settings.GRPO_IMPORT_ROOTS[0]) / name  # the server's import folder (the same data folder)
    shutil.copytree(verl_dumps, folder)
    try:
        done = cli(web_server, token, "import", name, "--name", "verl from the cli")
    finally:
        shutil.rmtree(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    run = Run.objects.get(name="verl from the cli")
    assert f"imported run {run.pk}: rollouts for 2 steps: verl dumps every step it trained" in done.stdout
    assert "computed by grpo-web from the scores with verl's GRPO estimator" in done.stdout
    assert Rollout.objects.filter(run=run).count() == 12

    uploaded = cli(web_server, token, "import", trl_output.output_dir, "--upload", "--name", "trl upload")
    assert uploaded.returncode == 0, uploaded.stdout + uploaded.stderr
    run = Run.objects.get(name="trl upload")
    assert sorted(set(Rollout.objects.filter(run=run).values_list("step", flat=True))) == [2, 3]

    refused = cli(web_server, token, "import", str(tmp_path))
    assert refused.returncode == 2 and "only files under the import folders" in refused.stderr


def test_import_a_verl_run_with_its_validation_folder(web_server, owner, verl_dumps, verl_validation):
    _, token = token_create(owner=owner, name="cli", scope="write")
    folder = Path(settings.GRPO_IMPORT_ROOTS[0]) / f"verl-{uuid.uuid4().hex[:8]}"
    shutil.copytree(verl_dumps, folder / "rollouts")
    shutil.copytree(verl_validation[0], folder / "val")
    try:
        done = cli(web_server, token, "import", str(folder / "rollouts"), "--validation", str(folder / "val"))
        uploaded = cli(web_server, token, "import", str(folder / "rollouts"), "--upload", "--validation", "val")
    finally:
        shutil.rmtree(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 validations (steps 0, 2, 4) from verl's validation dump, as its evaluations" in done.stdout
    run = Run.objects.get(pk=int(done.stdout.split("imported run ")[1].split(":")[0]))
    assert sorted(run.evaluations.values_list("step", flat=True)) == [0, 2, 4]
    assert uploaded.returncode == 2 and "--validation: a server path" in uploaded.stderr


def test_with_only_the_standard_library_the_client_file_is_the_same_command(web_server, owner, trl_output):
    # a machine with the attach client and no app (no `grpo-web` on PATH): the manual's
    # `python grpo_web/client.py import ...` from a checkout, here with Python's site-packages and PYTHONPATH cut
    # off (-I -S), so nothing beyond the standard library can be imported
    _, token = token_create(owner=owner, name="cli", scope="write")
    env = {"GRPO_WEB_URL": web_server, "GRPO_WEB_TOKEN": token, "PATH": os.environ.get("PATH", "")}
    client = str(Path(CHECKOUT) / "grpo_web" / "client.py")
    args = [sys.executable, "-I", "-S", client, "import", str(trl_output.output_dir), "--upload", "--name", "bare"]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    run = Run.objects.get(name="bare")
    assert f"imported run {run.pk}" in done.stdout
    assert sorted(set(Rollout.objects.filter(run=run).values_list("step", flat=True))) == [2, 3]
