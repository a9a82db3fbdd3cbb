"""verl's own config defaults, read from the installed package without importing verl (its generated
ppo_trainer.yaml), and the dotted names of a nested config. Shared by verl_keys and verl_carry. No Django here."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
from pathlib import Path


def flatten(data, prefix: str = "") -> dict:
    """A nested mapping as dotted keys (verl's override names)."""
    out = {}
    for key, value in (data or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out |= flatten(value, f"{name}.")
        else:
            out[name] = value
    return out


@functools.cache
def verl_defaults() -> dict:
    """verl's own config defaults, flattened: its generated ppo_trainer.yaml (what ``python -m
    verl.trainer.main_ppo`` composes before overrides), interpolations resolved where OmegaConf is here. Read from
    the installed package without importing verl; {} where verl is not installed."""
    data = _verl_generated()
    try:
        from omegaconf import OmegaConf

        data = OmegaConf.to_container(OmegaConf.create(data), resolve=True)
    except Exception:  # noqa: BLE001 - an interpolation OmegaConf cannot resolve here: keep the text, noted then
        pass
    return flatten(data) if isinstance(data, dict) else {}


@functools.cache
def verl_derived() -> dict:
    """verl's config nodes that are an interpolation of another (``actor_rollout_ref.rollout.mtp`` follows
    ``actor_rollout_ref.model.mtp``), dotted name -> the interpolation: a key below one is not a key an override
    can set (Hydra refuses it), the node it follows is."""
    raw = flatten(_verl_generated())
    return {k: v for k, v in raw.items() if isinstance(v, str) and v.startswith("${") and v.endswith("}")}


@functools.cache
def _verl_generated() -> dict:
    import yaml

    try:
        spec = importlib.util.find_spec("verl")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def verl_version() -> str | None:
    try:
        return importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return None
