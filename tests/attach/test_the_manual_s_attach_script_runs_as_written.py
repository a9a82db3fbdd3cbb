"""The manual's attach tutorial (docs/attach.md, "A complete script"), walked as written (issue 45): its script,
copied out of the page, runs against a live server with the commands the page gives, and its run appears, completed,
with TRL's rows."""

import re
import subprocess
import sys

import pytest

from runs.accounts.services import token_create
from runs.models import Rollout, Run, StepMetric
from tests.attach.test_attach_end_to_end import server
from tests.conftest import BASE_DIR, free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.filterwarnings("ignore::FutureWarning")]
MARKER = (
    "<!-- the tutorial's script: tests/attach/test_the_manual_s_attach_script_runs_as_written.py runs this block -->"
)


def tutorial() -> tuple[str, list[str]]:
    """The page's script, and the command lines of the indented block that runs it."""
    page = (BASE_DIR / "docs" / "attach.md").read_text()
    before, after = page.split(MARKER)
    script = re.match(r"\s*```python\n(.*?)```", after, re.S).group(1)
    commands = [line.strip() for line in before.rsplit("\n\n", 2)[-2].splitlines() if line.startswith("    ")]
    return script, commands


def test_the_tutorial_script_runs_as_written_and_its_run_appears(service_env, tiny_model, owner, tmp_path):
    script, commands = tutorial()
    assert commands[0].startswith("export GRPO_WEB_URL=") and commands[1] == (
        "python attach_tutorial.py var/models/tiny-qwen2 out"
    )
    (tmp_path / "attach_tutorial.py").write_text(script)
    _, token = token_create(owner=owner, name="tutorial", scope="attach")
    port = free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(BASE_DIR / "attach"),  # the client, as pip install ./attach makes it importable
        "HF_HUB_OFFLINE": "1",
        "GRPO_WEB_URL": f"http://127.0.0.1:{port}",
        "GRPO_WEB_TOKEN": token,
    }
    # the page's command, the demo's model folder made where the page says (var/models/tiny-qwen2 of the checkout)
    argv = commands[1].split()
    (tmp_path / "var" / "models").mkdir(parents=True)
    (tmp_path / argv[2]).symlink_to(tiny_model)
    with server(service_env, port, tmp_path / "web.log"):
        done = subprocess.run(
            [sys.executable, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = Run.objects.get(owner=owner, origin=Run.Origin.ATTACHED)
    assert run.name == "attach tutorial" and run.status == Run.Status.COMPLETED, (run.status, run.error)
    assert sorted(StepMetric.objects.filter(run=run).values_list("step", flat=True)) == [1, 2, 3]
    assert Rollout.objects.filter(run=run).count() == 3 * 4 and run.reward_names == ["digit_ratio"]
