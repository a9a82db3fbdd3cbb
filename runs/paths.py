"""Where a run's files are and which model a name means: the demo model names, event logs, checkpoints, log tails,
and a model folder's basic check. Shared by the capabilities and by the worker."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from django.conf import settings

from runs.models import Run


def model_problems(model: str) -> list[str]:
    """A local model folder must hold a config.json; a hub id must at least look like one (org/name)."""
    path = Path(resolve_model(model))
    if path.is_absolute() or model.startswith((".", "~")) or path.exists():
        if not (path / "config.json").is_file():
            return [f"model: no loadable model at {path} (no config.json)"]
        return []
    if model.count("/") != 1 or not all(part.strip() for part in model.split("/")):
        return [f"model: '{model}' is neither a local folder nor a hub id like org/name"]
    return []


def resolve_model(model: str) -> str:
    """'tiny', 'tiny-sft' and 'tiny-tools' name the local demo models (random, cold-started, and cold-started on
    calculator calls); anything else is a path or id."""
    return str(
        {
            "tiny": settings.GRPO_TINY_MODEL_DIR,
            "tiny-sft": settings.GRPO_TINY_SFT_MODEL_DIR,
            "tiny-tools": settings.GRPO_TINY_TOOLS_MODEL_DIR,
        }.get(model, model)
    )


def event_log_path(run: Run) -> Path:
    return run.run_dir / f"events-{run.attempt}.jsonl"


def checkpoint_path(run: Run) -> Path | None:
    if not run.checkpoint_step:
        return None
    path = (
        run.run_dir
        / "output"
        / (
            f"checkpoints/global_step_{run.checkpoint_step}"
            if run.trainer == "verl"
            else f"checkpoint-{run.checkpoint_step}"
        )
    )
    return path if path.is_dir() else None


def trainer_alive(run: Run) -> bool | None:
    """Whether a process still holds the run folder's lock (the supervisor takes it and its training process inherits
    it, so it is held while either lives); None when no attempt has locked this folder here."""
    try:
        fd = os.open(run.run_dir / "trainer.lock", os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing it lets go of the shared lock taken just now
    return False


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - 64 * 1024))
            return "\n".join(fh.read().decode(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
