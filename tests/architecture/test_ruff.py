"""ruff's lint and format hold for the whole tree ([tool.ruff] in pyproject.toml), as the import contracts do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUFF = str(Path(sys.executable).with_name("ruff"))


def ruff(*args: str, cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([RUFF, *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120)


def test_the_tree_passes_ruffs_lint():
    result = ruff("check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_is_formatted_as_ruff_formats_it():
    result = ruff("format", "--no-cache", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_lint_fails_on_an_unused_import_and_unsorted_imports():
    """The configuration is read and its rules are on: a module with an unused, unsorted import is refused."""
    result = ruff(
        "check",
        "--no-cache",
        "--stdin-filename",
        "runs/example.py",
        "-",
        stdin="import sys\nimport os\n\nprint(os.sep)\n",
    )
    assert result.returncode == 1
    assert "F401" in result.stdout and "I001" in result.stdout
