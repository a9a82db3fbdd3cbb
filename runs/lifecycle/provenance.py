"""A run's reproducibility record (``Run.provenance``, written by grpo_web_attach.provenance.record) as people read
it: the rows of the Config tab, the fields compare diffs, the comment block of the exported YAML."""

from __future__ import annotations

# what the rows call each library (the record keys them by distribution name)
LIBRARY_LABELS = {
    "trl": "TRL",
    "transformers": "transformers",
    "torch": "torch",
    "accelerate": "accelerate",
    "peft": "peft",
    "datasets": "datasets",
    "vllm": "vLLM",
    "verl": "verl",
    "deepspeed": "DeepSpeed",
    "ray": "Ray",
    "grpo-web": "grpo-web",
    "grpo-web-attach": "grpo-web-attach",
}


def _git(state) -> str | None:
    if not isinstance(state, dict) or not state.get("commit"):
        return None
    text = str(state["commit"])[:12]
    if state.get("branch"):
        text += f" ({state['branch']})"
    if state.get("dirty"):
        changed = state.get("changed") or []
        text += f", uncommitted changes in {len(changed)} file{'s' if len(changed) != 1 else ''}"
    return text


def provenance_fields(record: dict) -> dict[str, object]:
    """label -> value, in display order: what the record holds, nothing it does not (an empty record: {})."""
    if not record:
        return {}
    fields: dict[str, object] = {}
    libraries = record.get("libraries") or {}
    for name, version in libraries.items():
        fields[LIBRARY_LABELS.get(name, name)] = version
    for key, label in (("python", "Python"), ("platform", "platform")):
        if record.get(key):
            fields[label] = record[key]
    accelerator = record.get("accelerator") or {}
    fields["CUDA"] = accelerator.get("cuda") or "none (CPU)"
    fields["NVIDIA driver"] = accelerator.get("driver") or "none"
    fields["GPUs"] = ", ".join(accelerator.get("devices") or []) or "none"
    if "app" in record:
        fields["grpo-web commit"] = _git(record["app"]) or "not a git checkout"
    script = record.get("script")
    if isinstance(script, dict):
        fields["script"] = script.get("path")
        fields["script sha256"] = script.get("sha256")
        fields["script commit"] = _git(script.get("git")) or "not in a git work tree"
    for key, label in (("host", "host"), ("command", "command"), ("seed", "seed"), ("attempt", "attempt")):
        if record.get(key) is not None and record.get(key) != "":
            fields[label] = record[key]
    return fields


def script_source(record: dict) -> tuple[str, bool] | None:
    """The training script's source as the client read it and whether it was cut at the client's limit."""
    script = (record or {}).get("script")
    if not isinstance(script, dict) or not script.get("source"):
        return None
    return script["source"], bool(script.get("truncated"))


# the record's rows compare diffs: what changes what a run computes, not where or when it ran
COMPARED = ("Python", "CUDA", "NVIDIA driver", "GPUs", "grpo-web commit", "script sha256")


def compared_fields(record: dict) -> dict[str, object]:
    """The record's fields that compare diffs: every library version, and COMPARED."""
    fields = provenance_fields(record)
    libraries = {LIBRARY_LABELS.get(n, n) for n in (record or {}).get("libraries") or {}}
    return {k: v for k, v in fields.items() if k in libraries or k in COMPARED}


def yaml_comment(record: dict) -> str:
    """The record as the exported YAML's closing comment block ('' for none)."""
    fields = provenance_fields(record)
    if not fields:
        return ""
    lines = ["# reproducibility record (what the run trained with; not read back on import):"]
    lines += [f"#   {label}: {' '.join(str(value).splitlines())}" for label, value in fields.items()]
    return "\n".join(lines) + "\n"
