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
    return subprocess.run(command, cwd=cwd, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
                          capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 6 kept, 0 broken." in result.stdout


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the project's packages and contracts to break."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests" / "architecture").mkdir(parents=True)
    (tmp_path / "tests" / "__init__.py").touch()
    (tmp_path / "tests" / "architecture" / "__init__.py").touch()
    shutil.copy(ROOT / "tests" / "architecture" / "contracts.py", tmp_path / "tests" / "architecture")
    return tmp_path


BREAKS = {
    "runs imports workers": ("runs/models/lifecycle.py", "from workers import tasks", "Layers: wiring, then workers"),
    "rewards imports workers": ("rewards/services.py", "import workers.supervisor",
                                "Layers: wiring, then workers"),
    "a cycle between capabilities": ("runs/rollouts/ingest.py", "from runs.lifecycle import services",
                                     "No import cycles"),
    "Django in the training program": ("workers/capture.py", "from django.conf import settings",
                                       "The training program (and what it imports) has no Django"),
    "torch in the web side": ("runs/rollouts/groups.py", "import torch", "torch, transformers, trl"),
    "Django in the command-line client": ("grpo_web/client.py", "import django",
                                          "The command-line client is the standard library only"),
    "rewards reads the runs API": ("rewards/api.py", "import runs.lifecycle.api", "Layers: wiring, then workers"),
    "a private name from another module": ("runs/compare/views.py", "from runs.rollouts.views import _number",
                                           "No module imports another module's private"),
}


@pytest.mark.parametrize("case", BREAKS)
def test_a_broken_rule_fails_its_contract(tree, case):
    path, line, contract = BREAKS[case]
    with open(tree / path, "a") as fh:
        fh.write(f"\n{line}  # added by the test\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "Contracts: 5 kept, 1 broken." in result.stdout
    broken = result.stdout.split("Broken contracts", 1)[1]
    assert contract in " ".join(broken.split())
