"""Reads of the model registry: every model the app has made (a run's final output, its checkpoints still on disk)
and every base model a run started from, with lineage: which run made a model, from which model, on which data."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from runs.models import Run
from runs.paths import resolve_model

# what a model folder needs to be loaded elsewhere: weights, config, tokenizer (no optimizer or trainer state)
ARCHIVE_FILES = re.compile(
    r"(.*\.safetensors|.*\.safetensors\.index\.json|config\.json|generation_config\.json|"
    r"tokenizer.*|special_tokens_map\.json|vocab\.json|merges\.txt|chat_template\.jinja|"
    r"added_tokens\.json|train_config\.json|grpo_web\.json|adapter_config\.json)"
)
_MADE = re.compile(r"runs/(?P<uid>[0-9a-f-]{36})/output/(?P<which>final|checkpoint-\d+)$")


@dataclass
class ModelEntry:
    key: str  # "final" or "checkpoint-N" of ``run``; the name for a base model
    path: str  # what a run's model field takes
    run: Run | None = None  # the run that made it; None for a base model
    parent: "ModelEntry | None" = None  # the model the run started from
    used_by: list[Run] = field(default_factory=list)  # runs that started from this model

    @property
    def is_base(self) -> bool:
        return self.run is None

    @property
    def adapter(self) -> Path | None:
        """A LoRA run's adapter alone, the folder workers.training.train.save_final writes beside the merged final
        model; None for any other model."""
        if self.run is None or self.key != "final":
            return None
        folder = self.run.run_dir / "output" / "adapter"
        return folder if (folder / "adapter_config.json").is_file() else None

    @property
    def label(self) -> str:
        return self.key if self.run is None else f"{self.run.name}: {self.key}"


def made_model(path: str) -> tuple[str, str] | None:
    """(run uid, "final" or "checkpoint-N") when ``path`` is a model folder the app made."""
    try:
        relative = Path(path).resolve().relative_to(settings.DATA_DIR.resolve())
    except (ValueError, OSError):
        return None
    match = _MADE.match(relative.as_posix())
    return (match["uid"], match["which"]) if match else None


def run_models(run: Run) -> list[str]:
    """The model folders of ``run`` still on disk: "final" first, then its checkpoints by step."""
    output = run.run_dir / "output"
    if not output.is_dir():
        return []
    steps = sorted(int(p.name.split("-")[1]) for p in output.glob("checkpoint-*") if p.name.split("-")[1].isdigit())
    keys = (["final"] if (output / "final" / "config.json").is_file() else []) + [f"checkpoint-{s}" for s in steps]
    return [k for k in keys if (output / k / "config.json").is_file()]


def registry(user) -> list[ModelEntry]:
    """The models ``user`` may see (those of runs they may see), made ones newest first, then base models."""
    runs = list(Run.objects.visible_to(user).select_related("dataset_version__dataset", "owner"))
    by_uid = {str(r.uid): r for r in runs}
    made: dict[tuple[str, str], ModelEntry] = {}
    of_run: dict[str, list[ModelEntry]] = {}
    for run in runs:
        for key in run_models(run):
            entry = ModelEntry(key=key, path=str(run.run_dir / "output" / key), run=run)
            made[str(run.uid), key] = entry
            of_run.setdefault(str(run.uid), []).append(entry)
    bases: dict[str, ModelEntry] = {}
    for run in runs:
        source = made_model(resolve_model(run.model))
        if source and source in made:
            parent = made[source]
        elif source and source[0] in by_uid:  # made by a run we can see, since deleted from disk
            parent = None
        else:
            parent = bases.setdefault(run.model, ModelEntry(key=run.model, path=run.model))
        if parent is not None:
            parent.used_by.append(run)
        for entry in of_run.get(str(run.uid), []):
            entry.parent = parent
    return list(made.values()) + sorted(bases.values(), key=lambda e: e.key)


def model_entry(user, run_id: int, key: str) -> ModelEntry | None:
    run = Run.objects.visible_to(user).filter(pk=run_id).first()
    if run is None or key not in run_models(run):
        return None
    return next((e for e in registry(user) if e.run == run and e.key == key), None)


def archive_files(entry: ModelEntry, *, adapter: bool = False) -> list[Path]:
    """The loadable files of the model, or with ``adapter`` of its LoRA adapter (entry.adapter)."""
    folder = entry.adapter if adapter else Path(entry.path)
    return sorted(p for p in folder.iterdir() if p.is_file() and ARCHIVE_FILES.fullmatch(p.name))
