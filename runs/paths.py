"""Where a run's files are and which model a name means: the demo model names, event logs, checkpoints, log tails,
and which models a user may load (model_problems). Shared by the capabilities and by the worker."""

from __future__ import annotations

import fcntl
import os
import re
import uuid
from pathlib import Path

from django.conf import settings

from grpo_web.env import hub_offline
from runs.models import Run

DEMO_MODELS = ("tiny", "tiny-sft", "tiny-tools")
# a hub id is org/name and never a path: no leading dot, no "..", nothing but letters, digits, '.', '-', '_'
HUB_MODEL_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
# what a refusal says about a folder the user may not read: the same whether or not it exists
NOT_YOURS = "model: not found or not yours"
_EXPORT = re.compile(r"run-(?P<pk>\d{1,18})-(?:final|checkpoint-\d+)")


def is_hub_id(model: str) -> bool:
    return len(model) <= 200 and ".." not in model and HUB_MODEL_ID.fullmatch(model) is not None


def model_problems(model: str, *, user) -> list[str]:
    """Why ``user`` cannot train, evaluate or sample from ``model``; [] when they can: one they may read
    (model_access_problems) and, unless a hub id, a folder holding a config.json."""
    problems = model_access_problems(model, user=user)
    if problems:
        return problems
    if model not in DEMO_MODELS and is_hub_id(model):
        return hub_model_problems(model)
    path = Path(resolve_model(model))
    if not (path / "config.json").is_file():
        return [f"model: no loadable model at {path} (no config.json)"]
    return []


def hub_model_problems(model: str) -> list[str]:
    """A hub model on a server that may not reach the hub (HF_HUB_OFFLINE) must be in its hub cache already: said
    now, not when the run starts and transformers fails to download it. Online, the hub answers at start."""
    if not hub_offline():
        return []
    from huggingface_hub import try_to_load_from_cache  # only for a hub id: most runs never load it

    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        return []
    return [
        f"model: '{model}' is not in this server's Hugging Face cache and the server runs offline "
        f"(HF_HUB_OFFLINE=1): download it where the hub is reachable, or give a model folder"
    ]


def model_access_problems(model: str, *, user) -> list[str]:
    """A model is a demo name ('tiny', 'tiny-sft', 'tiny-tools'), a hub id (org/name) or a model folder (an
    absolute path) that ``user`` may read (model_readable). A folder they may not read is refused with NOT_YOURS,
    the same whether or not it exists."""
    if not isinstance(model, str) or not (
        model in DEMO_MODELS or model.startswith(("/", ".", "~")) or is_hub_id(model)
    ):
        return [
            f"model: {str(model)[:200]!r} is neither a demo model ({', '.join(DEMO_MODELS)}), a model folder "
            f"(an absolute path) nor a hub id like org/name"
        ]
    return [] if model_readable(model, user=user) else [NOT_YOURS]


def model_access_at_start(model: str, *, user) -> str:
    """Why ``user``'s queued run or job may not load ``model`` now that it starts; "" when it may. Access is checked
    at submit and again here: a run shared with them when they queued may have been unshared (or deleted) since."""
    problems = model_access_problems(model, user=user)
    if not problems:
        return ""
    return (
        f"{'; '.join(problems)} (checked again as it started: a model you could load when this was queued, "
        f"such as a run shared with you, may have been unshared since)"
    )


def model_roots() -> list[Path]:
    """The server folders every user may load models from: the demo models' folder (GRPO_DATA_DIR/models) and
    GRPO_MODEL_ROOTS (none by default)."""
    demo = [Path(settings.DATA_DIR) / "models"] + [
        Path(p).parent
        for p in (settings.GRPO_TINY_MODEL_DIR, settings.GRPO_TINY_SFT_MODEL_DIR, settings.GRPO_TINY_TOOLS_MODEL_DIR)
    ]
    return [Path(p) for p in dict.fromkeys([*demo, *settings.GRPO_MODEL_ROOTS])]


def model_readable(model: str, *, user) -> bool:
    """Whether ``user`` may load ``model``: a demo name; a hub id (that no folder beside the server answers to: the
    workers load models from there, and transformers tries a local folder of the id's name first); or a folder under
    a model root (model_roots), or the output (final model, checkpoints) or export of a run ``user`` owns or that a
    team of theirs shares. Symbolic links and '..' are resolved first."""
    if model in DEMO_MODELS:
        return True
    try:
        if is_hub_id(model):
            return not (Path(settings.BASE_DIR) / model).exists()
        path = Path(model)
        if not path.is_absolute():
            return False
        resolved = path.resolve()
        if not run_area(resolved):  # run folders and exports answer to their run's sharing, even inside a root
            return any(resolved.is_relative_to(root.resolve()) for root in model_roots())
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a name too long, a link loop
        return False
    run = model_run(resolved)
    return run is not None and Run.objects.visible_to(user).filter(pk=run.pk).exists()


def run_area(resolved: Path) -> bool:
    """Whether the folder is among the runs' folders or the exports, where each run's files are its owner's."""
    return any(
        resolved.is_relative_to(Path(base).resolve())
        for base in (Path(settings.DATA_DIR) / "runs", settings.GRPO_EXPORT_DIR)
    )


def model_run(resolved: Path) -> Run | None:
    """The run whose output (GRPO_DATA_DIR/runs/<uid>/output/...) or export (GRPO_EXPORT_DIR/<user>/run-<id>-<key>/)
    the resolved folder is in, or None."""
    for base, owner_of in (
        (Path(settings.DATA_DIR) / "runs", _run_of_output),
        (settings.GRPO_EXPORT_DIR, _run_of_export),
    ):
        try:
            parts = resolved.relative_to(Path(base).resolve()).parts
        except (ValueError, OSError):
            continue
        run = owner_of(parts)
        if run is not None:
            return run
    return None


def _run_of_output(parts: tuple[str, ...]) -> Run | None:
    if len(parts) < 3 or parts[1] != "output":
        return None
    try:
        uid = uuid.UUID(parts[0])
    except ValueError:
        return None
    # a run's folder is named by its uid as str() writes it; another spelling of the same uid is no folder of it
    return Run.objects.filter(uid=uid).first() if str(uid) == parts[0] else None


def _run_of_export(parts: tuple[str, ...]) -> Run | None:
    match = _EXPORT.fullmatch(parts[1]) if len(parts) >= 2 else None
    return Run.objects.filter(pk=int(match["pk"])).first() if match else None


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


def event_log_path(run: Run, attempt: int | None = None) -> Path:
    """The event log of the run's attempt ``attempt`` (the current one by default)."""
    return run.run_dir / f"events-{run.attempt if attempt is None else attempt}.jsonl"


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
    return lock_held(run.run_dir / "trainer.lock")


def supervisor_lock_path(run: Run) -> Path:
    """The lock the supervisor of the run's current attempt holds from its claim until it has recorded the outcome
    (workers.supervisor): its own process alone, never its trainer, so the kernel lets go of it the moment the
    supervisor dies."""
    return run.run_dir / f"supervisor-{run.attempt}.lock"


def supervisor_alive(run: Run) -> bool | None:
    """Whether the process supervising the run's current attempt lives (it may be paused or busy: its heartbeat
    says whether it works); None when this machine cannot tell (the folder is elsewhere, or an attempt started before
    supervisors took this lock)."""
    return lock_held(supervisor_lock_path(run))


def lock_held(path: Path) -> bool | None:
    """Whether a process holds an exclusive flock on ``path``; None when there is no such file here."""
    try:
        fd = os.open(path, os.O_RDONLY)
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
