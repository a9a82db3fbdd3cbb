"""A run as the YAML the config import reads back (runs.lifecycle.trl_yaml.parse_run_yaml): TRL's GRPOConfig (an SFT
run: SFTConfig) fields plus model, dataset and pinned rewards, each field's source as a comment, and the run's
reproducibility record as a closing comment."""

from __future__ import annotations

import yaml
from grpo_web_protocol.config import EVAL_FIELDS, FROM_FILE, TOKEN_FIELDS, kind_fields

from runs.lifecycle.provenance import yaml_comment
from runs.models import Run


def run_yaml(run: Run) -> str:
    """The run as a TRL GRPOConfig (an SFT run: SFTConfig) YAML plus model, dataset and pinned rewards;
    parse_run_yaml reads it back."""
    data = {"trainer": run.kind} if run.is_sft else {"trainer": "verl"} if run.trainer == Run.Trainer.VERL else {}
    data |= {
        "name": run.name,
        "model_name_or_path": run.model,
        # a run trained elsewhere: the dataset name its source reported (no version: the data is not here)
        "dataset_name": run.dataset_version.dataset.name if run.dataset_version_id else run.dataset_label,
        "dataset_version": run.dataset_version.number if run.dataset_version_id else None,
        "reward_funcs": [r["name"] for r in run.rewards],
        "reward_weights": [r["weight"] for r in run.rewards],
        "reward_versions": [r.get("version") for r in run.rewards],
        "requested_gpus": run.requested_gpus,
        "engine": run.engine,
        "num_workers": run.num_workers,
    }
    if run.token_sample_groups != TOKEN_FIELDS["token_sample_groups"].default:
        data["token_sample_groups"] = run.token_sample_groups
    if run.tools:
        data["tools"] = [t["name"] for t in run.tools]
    if run.environment:
        data["environment"] = run.environment["name"]
    fields = kind_fields(run.kind)
    config = {k: v for k, v in run.config.items() if k in fields and v is not None}
    trl_config = "SFTConfig" if run.is_sft else "GRPOConfig"
    header = f"# grpo-web run {run.pk}: model, dataset and rewards, then TRL {trl_config} fields\n"
    sources = run.config_sources or {}
    if sources:
        header += (
            "# each field's comment says where its value came from: file (the imported config), form (the run "
            "form),\n# trainer default (left out: TRL's default) or grpo-web (left out: grpo-web's own default)\n"
        )
    evaluation = {k: v for k, v in (run.evaluation or {}).items() if k in EVAL_FIELDS}
    lines = [_commented(k, v, sources.get(k, "")) for k, v in config.items()]
    lines += [_commented(k, v, FROM_FILE if sources else "") for k, v in run.config_extra.items()]
    body = header + yaml.safe_dump(data, sort_keys=False) + "".join(lines) + _dump(evaluation)
    return body + yaml_comment(run.provenance)


def _dump(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False) if data else ""


def _commented(key: str, value, source: str) -> str:
    """``key: value`` as YAML, with where it came from as a comment (on its own line above a value that takes
    several)."""
    text = yaml.safe_dump({key: value}, sort_keys=False)
    if not source:
        return text
    if text.count("\n") == 1:
        return f"{text.rstrip()}  # {source}\n"
    return f"# {key}: {source}\n{text}"
