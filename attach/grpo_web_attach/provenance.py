"""A run's reproducibility record: the library versions it trained with, the accelerator and driver, the code's git
state, the host, the command and the seed (and, for a script of the user's own, the script's source).

Both sides record it the same way: grpo-web's training program puts it in its ``started`` event, the attach client
sends it when it creates its run. Standard library only; nothing here imports torch (it reads it when the training
process already has)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

# the distributions whose versions decide what a GRPO run computes, in the order a page lists them
LIBRARIES = (
    "trl",
    "transformers",
    "torch",
    "accelerate",
    "peft",
    "datasets",
    "vllm",
    "verl",
    "deepspeed",
    "ray",
    "grpo-web",
    "grpo-web-attach",
)
SCRIPT_BYTES = 256 * 1024  # a script's source is kept up to this many bytes (its sha256 is of the whole file)
CHANGED_FILES = 50  # uncommitted files named, at most
GIT_TIMEOUT_S = 5.0


def library_versions() -> dict[str, str]:
    """The installed version of each of LIBRARIES that is installed."""
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def accelerator() -> dict:
    """CUDA as torch was built for it, the GPUs torch sees and NVIDIA's driver version; {} on a CPU machine (or where
    torch is not loaded: nothing is imported to find out)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    found: dict = {}
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    if cuda:
        found["cuda"] = str(cuda)
    try:
        if torch.cuda.is_available():
            found["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # a broken driver is for the run itself to report
        pass
    driver = _command(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    if driver:
        found["driver"] = driver.splitlines()[0].strip()
    return found


def _command(argv: list[str], cwd: str | Path | None = None) -> str | None:
    """``argv``'s output, or None when it is not installed, fails or takes longer than GIT_TIMEOUT_S."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(folder: str | Path) -> dict | None:
    """The commit ``folder`` is checked out at, its branch, and the files changed since that commit; None when it is
    not in a git work tree (or git is not installed)."""
    commit = _command(["git", "rev-parse", "HEAD"], cwd=folder)
    if not commit:
        return None
    branch = _command(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=folder)
    status = _command(["git", "status", "--porcelain", "--untracked-files=no"], cwd=folder) or ""
    changed = [line[3:] for line in status.splitlines() if line.strip()]
    return {
        "commit": commit,
        "branch": branch or "",
        "dirty": bool(changed),
        "changed": changed[:CHANGED_FILES],
    }


def script_record(path: str | Path) -> dict | None:
    """A Python script's path, source (its first SCRIPT_BYTES) and sha256, and its git state; None when ``path`` is
    not a readable .py file."""
    path = Path(path)
    if path.suffix != ".py":
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return {
        "path": str(path.resolve()),
        "sha256": hashlib.sha256(data).hexdigest(),
        "source": data[:SCRIPT_BYTES].decode("utf-8", "replace"),
        "truncated": len(data) > SCRIPT_BYTES,
        "git": git_state(path.resolve().parent),
    }


def record(*, seed=None, app: str | Path | None = None, script: str | Path | None = None) -> dict:
    """The reproducibility record of the process that calls it. ``app``: a grpo-web checkout whose git state is the
    app's; ``script``: the user's training script, kept with its source."""
    found = {
        "libraries": library_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "command": " ".join([sys.executable, *sys.argv]),
        "seed": seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        "accelerator": accelerator(),
    }
    if app is not None:
        found["app"] = git_state(app)
    if script is not None:
        found["script"] = script_record(script)
    return found
