"""The import contracts in pyproject.toml ([tool.importlinter]) hold, and each one fails when its rule is broken."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("grpo_web", "runs", "rewards", "workers")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the tree at ``cwd``, with that tree first on the import path."""
    command = [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"]
    return subprocess.run(
        command,
        cwd=cwd,
        # the attach client and the protocol are distributions of their own, in attach/ and protocol/: on the path as
        # pip install -e puts them
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{cwd}:{cwd / 'attach'}:{cwd / 'protocol'}"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 9 kept, 0 broken." in result.stdout


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the project's packages and contracts to break."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    shutil.copytree(ROOT / "attach" / "grpo_web_attach", tmp_path / "attach" / "grpo_web_attach")
    shutil.copytree(
        ROOT / "protocol" / "grpo_web_protocol",
        tmp_path / "protocol" / "grpo_web_protocol",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests" / "architecture").mkdir(parents=True)
    (tmp_path / "tests" / "__init__.py").touch()
    (tmp_path / "tests" / "architecture" / "__init__.py").touch()
    shutil.copy(ROOT / "tests" / "architecture" / "contracts.py", tmp_path / "tests" / "architecture")
    return tmp_path


LAYERS = "Layers: wiring, the workers' Django side"
TRAINING = "The training program (workers.training) has no Django"
PROTOCOL = "The protocol (protocol/, grpo_web_protocol) is its own distribution"
WEB_SIDE = "The web side (grpo_web, runs, rewards) reads the protocol, never the training program"
ATTACH = "The attach client"

# a break: (file, the line appended to it, the contracts it breaks)
BREAKS = {
    "runs imports workers": ("runs/models/lifecycle.py", "from workers import tasks", (LAYERS, WEB_SIDE)),
    "rewards imports workers": ("rewards/services.py", "import workers.supervisor", (LAYERS, WEB_SIDE)),
    "the training program reads a reward's row": ("workers/training/train.py", "import rewards.selectors", (TRAINING,)),
    "the training program reads the settings": ("workers/training/sft.py", "from grpo_web import env", (TRAINING,)),
    "the protocol reads the settings": (
        "protocol/grpo_web_protocol/config.py",
        "from grpo_web import env",
        (TRAINING, PROTOCOL),  # the training program reads the protocol: the settings through it
    ),
    "the protocol reads the training program": (
        "protocol/grpo_web_protocol/events.py",
        "import workers.training.capture",
        (PROTOCOL, WEB_SIDE),  # and the web side through it
    ),
    "runs reads the training program": (
        "runs/attach/importers/verl.py",
        "from workers.training.verl_data import rollouts_event",
        (WEB_SIDE,),
    ),
    "the API reads the training program": ("grpo_web/api.py", "import workers.training.train", (WEB_SIDE,)),
    "rewards imports the training program": (
        "rewards/toolspec.py",
        "import workers.training.tooling",
        (LAYERS, WEB_SIDE),
    ),
    "torch in the workers' Django side": ("workers/supervisor.py", "import torch", ("torch, transformers, trl",)),
    "torch in the protocol": ("protocol/grpo_web_protocol/scoring.py", "import torch", ("torch, transformers, trl",)),
    "a cycle between capabilities": (
        "runs/rollouts/ingest.py",
        "from runs.lifecycle import services",
        ("No import cycles",),
    ),
    "Django in the training program": ("workers/training/capture.py", "from django.conf import settings", (TRAINING,)),
    "torch in the web side": ("runs/rollouts/groups.py", "import torch", ("torch, transformers, trl",)),
    "Django in the command-line client": (
        "grpo_web/client.py",
        "import django",
        ("The command-line client is the standard library only",),
    ),
    "the attach client reads the training program": (
        "attach/grpo_web_attach/capture.py",
        "from workers.training import capture",
        (ATTACH, PROTOCOL, WEB_SIDE),  # and all that stands on it
    ),
    "the attach client reads the protocol": (
        "attach/grpo_web_attach/sender.py",
        "import grpo_web_protocol.events",
        (ATTACH,),
    ),
    "rewards reads the runs API": ("rewards/api.py", "import runs.lifecycle.api", (LAYERS,)),
    "a private name from another module": (
        "runs/compare/views.py",
        "from runs.rollouts.views import _number",
        ("No module imports another module's private",),
    ),
}


@pytest.mark.parametrize("case", BREAKS)
def test_a_broken_rule_fails_its_contract(tree, case):
    path, line, contracts = BREAKS[case]
    with open(tree / path, "a") as fh:
        fh.write(f"\n{line}  # added by the test\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert f"Contracts: {9 - len(contracts)} kept, {len(contracts)} broken." in result.stdout
    broken = " ".join(result.stdout.split("Broken contracts", 1)[1].split())
    for contract in contracts:
        assert contract in broken


def test_the_layers_name_every_module_of_the_workers_django_side():
    """The workers' Django side is a layer of its own, listed module by module (the training program, inside workers/,
    is a lower layer): a module added to workers/ and not to the list would be checked by no layer."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["id"] == "layers")["layers"]
    listed = {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}
    present = {
        f"workers.{p.stem}"
        for p in (ROOT / "workers").iterdir()
        if p.name != "training" and p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert present and present <= listed, sorted(present - listed)
