"""What a run is made of, as one value: the run form, a run YAML (the import page, POST /api/runs, `grpo-web submit`,
`manage.py submit_run`), a retry or a clone of a run and a recipe's stage each build a RunSpec, and
runs.lifecycle.services.run_create makes the run of it. How it is created (its owner, whether it is queued while no
worker fits, whether the sandbox checks its rewards first) is run_create's to say, not the spec's."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

import yaml
from grpo_web_protocol.config import TOKEN_FIELDS

from runs.lifecycle.trl_yaml import ImportedRun, parse_run_yaml
from runs.models import DatasetVersion, Run
from runs.safe_yaml import MAX_DEPTH, nesting_depth


class RunRefused(Exception):
    """The run would fail: each message names the field or the reward function."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class RunSpec:
    """Every field of a run that its user chose; the Run row's own names. Edit one with ``dataclasses.replace``."""

    name: str
    model: str  # 'tiny', a model folder or a hub id
    dataset_version: DatasetVersion
    rewards: list[dict]  # pinned: {name, weight, version_id, version}, or a trusted built-in {name, weight, builtin}
    config: dict  # GRPOConfig (an SFT run: SFTConfig) fields under TRL's names
    config_extra: dict = field(default_factory=dict)  # further GRPOConfig fields, passed to it unchanged
    # where each config value came from (config.SOURCES); a field given without one came from the caller's file
    config_sources: dict = field(default_factory=dict)
    kind: str = Run.Kind.GRPO  # grpo, or sft: the rewards (optional) only score its evaluations
    trainer: str = Run.Trainer.TRL  # trl or verl (GRPO only)
    evaluation: dict = field(default_factory=dict)  # EvalFields; {} or eval_steps 0: no periodic evaluation
    tools: list[dict] = field(default_factory=list)  # {name, builtin} or {name, version_id, version}
    environment: dict = field(default_factory=dict)  # one tool-like {name, ...}, or {} for none
    requested_gpus: int = 0
    engine: str = "local"  # local, or ray: a worker serving its Ray cluster submits a Ray job (docs/ray.md)
    num_workers: int = 1  # Ray Train workers of a Ray run
    # groups per generation batch whose per-token values are kept (grpo_web_attach.tokens; -1 all, 0 none)
    token_sample_groups: int = TOKEN_FIELDS["token_sample_groups"].default
    parent: Run | None = None  # the run this one was cloned or retried from
    # what the config import did with keys it did not take as they are (ImportedRun.notes), kept with the run
    import_notes: list[str] = field(default_factory=list)

    @classmethod
    def of_run(cls, run: Run) -> RunSpec:
        """The spec a run was made from (its environment's reward column is worked out again by run_create)."""
        return cls(
            **{
                f.name: copy.deepcopy(getattr(run, f.name))
                for f in dataclasses.fields(cls)
                if f.name not in ("dataset_version", "parent")
            },
            dataset_version=run.dataset_version,
            parent=run.parent,
        )

    @classmethod
    def from_form(cls, data: dict, *, parent: Run | None = None) -> RunSpec:
        """RunForm's cleaned data (runs.lifecycle.forms.RunForm.clean puts every field there), with the notes of the
        config imported into the form (``import_notes``) where there was one."""
        return cls(
            parent=parent,
            **{
                f.name: data[f.name]
                for f in dataclasses.fields(cls)
                if f.name not in ("parent", "config_sources", "import_notes")
            },
            config_sources=data.get("config_sources") or {},
            import_notes=list(data.get("import_notes") or []),
        )

    @classmethod
    def from_imported(cls, imported) -> RunSpec:
        """What the YAML import read (runs.lifecycle.trl_yaml.ImportedRun, from a TRL, open-r1, verl or Oumi config);
        RunRefused with the import's errors, each naming its key."""
        if imported.errors:
            raise RunRefused(imported.errors)
        return cls(
            name=imported.name,
            model=imported.model,
            dataset_version=imported.dataset_version,
            rewards=imported.rewards,
            config=imported.config,
            config_extra=imported.extra,
            config_sources=imported.sources,
            kind=imported.kind,
            trainer=imported.trainer,
            evaluation=imported.evaluation,
            tools=imported.tools,
            environment=imported.environment,
            requested_gpus=imported.requested_gpus,
            engine=imported.engine,
            num_workers=imported.num_workers,
            token_sample_groups=imported.token_sample_groups,
            import_notes=list(imported.notes),
        )

    @classmethod
    def from_yaml(cls, text: str, *, owner) -> RunSpec:
        """A run YAML, read for ``owner`` (whose datasets and rewards it names)."""
        return cls.from_imported(parse_run_yaml(text, owner=owner))

    def as_run(self, **fields) -> Run:
        """An unsaved Run of this spec (``fields`` set or overridden), for what reads a run before there is one."""
        return Run(**{**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, **fields})


def api_import(*, yaml_text: str | None, config: dict | None, owner) -> ImportedRun:
    """What POST /api/runs's body imports (a run YAML, or the same keys as a mapping), with its notes; RunRefused
    for a body it cannot read."""
    if yaml_text is None and config is None:
        raise RunRefused(["give yaml or config"])
    if yaml_text is None and nesting_depth(config) > MAX_DEPTH:
        raise RunRefused([f"config: nested deeper than {MAX_DEPTH} levels"])
    text = yaml_text if yaml_text is not None else yaml.safe_dump(config, sort_keys=False)
    return parse_run_yaml(text, owner=owner)
