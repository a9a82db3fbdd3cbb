"""Runs as TRL config YAML: what `trl grpo --config` reads (TRL's field names, flat), plus model, dataset and rewards.
``trainer: sft`` makes it an SFT run: SFTConfig's names, as `trl sft --config` reads them (rewards optional: they
only score its evaluations).

A TRL user's config comes in unchanged: GRPOConfig fields the run form knows fill the form; other GRPOConfig fields
are passed through to GRPOConfig; fields grpo-web sets itself (output_dir, logging, reporting) are ignored with a note;
anything else is an error naming the key.

The keys it knows are in ``import_keys``; a run written back as this YAML is ``run_as_yaml.run_yaml`` (both
importable from here, as before).
"""

from __future__ import annotations

import math

import yaml
from django.db.models import Case, When
from grpo_web_protocol import trl_fields
from grpo_web_protocol.config import (
    EVAL_FIELDS,
    FROM_FILE,
    GRPO_FIELDS,
    KINDS,
    TOKEN_FIELDS,
    config_sources,
    kind_fields,
)
from grpo_web_protocol.verl_carry import is_verl_key, run_yaml_key_problem

from rewards.builtins import TRUSTED
from rewards.library import ENVIRONMENTS, OPEN_R1, OUMI, TOOLS
from rewards.models import RewardFunction
from rewards.services import reward_builtins_install
from runs.access import visible_versions
from runs.datasets.demo import user_made
from runs.datasets.importing import DatasetError
from runs.datasets.mapping import RESERVED, Mapping
from runs.datasets.services import dataset_version_map
from runs.lifecycle.foreign_yaml import from_verl_yaml, kind_of
from runs.lifecycle.import_keys import (
    FRACTIONAL,
    LIBRARY,
    MANAGED,
    NOT_APPLIED,
    RENAMED,
    REWARD_ALIASES,
    REWARD_PARAMETERS,
    SCRIPT_KEYS,
    SFT_RENAMED,
    ImportedRun,
)
from runs.lifecycle.oumi_yaml import from_oumi_yaml
from runs.lifecycle.run_as_yaml import run_yaml  # noqa: F401 - importable from here, as before
from runs.lifecycle.trl_types import WrongType, field_types, shown, trl_value
from runs.lifecycle.verl_launch import is_launch_script, launch_script_mapping
from runs.safe_yaml import MAX_BYTES, load_yaml, text_size, too_large


def _coerce(name: str, value, errors: list[str], fields: dict = GRPO_FIELDS):
    """A grpo-web config field's value from a file, held to its type as TRL's CLI holds it (runs.lifecycle.trl_types);
    a value of another type is an error naming the key, and the field keeps its default."""
    f = fields.get(name) or EVAL_FIELDS[name]
    if value is None:
        return None
    if name == "bf16" and isinstance(value, bool):  # TRL's bf16 is a bool; grpo-web's adds "auto"
        return "yes" if value else "no"
    if name == "lora_target_modules" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)  # TRL's ModelConfig takes a list
    types = field_types(f.type)
    try:
        value = trl_value(name, value, types)
    except WrongType as exc:
        errors.append(str(exc))
        return f.default
    return float(value) if "float" in types and isinstance(value, int) and not isinstance(value, bool) else value


# grpo-web's own keys and TRL's script keys, each with the YAML types it takes (engine and num_workers: _engine checks
# them against their choices and range)
SCRIPT_TYPES = {
    **dict.fromkeys(
        (
            "name",
            "model_name_or_path",
            "model",
            "dataset_name",
            "system_prompt",
            "dataset_prompt_column",
            "dataset_train_split",
            "dataset_test_split",
            "trainer",
            "vllm_device",
        ),
        ("null", "str"),
    ),
    **dict.fromkeys(("requested_gpus", "num_processes", "dataset_version"), ("int", "null")),
    **dict.fromkeys(("warmup_ratio", "num_train_epochs"), ("float", "null")),
}


def _typed(data: dict, out: ImportedRun, config_names: frozenset, fields: dict) -> dict:
    """``data`` with each value of a known key held to its type (TRL's CLI's parsing of a string applied, as
    trl_types says); each value of another type is an error naming the key, and is left out of what is returned."""
    typed = {}
    for key, value in data.items():
        schema = trl_fields.schema_field(key) if key in config_names else None
        types = SCRIPT_TYPES.get(key) or (schema and schema.get("types"))
        if not types or key in fields or key in EVAL_FIELDS:
            typed[key] = value  # grpo-web's own config fields: _coerce holds them to their types
            continue
        try:
            typed[key] = trl_value(key, value, types)
        except WrongType as exc:
            out.errors.append(str(exc))
    return typed


def parse_run_yaml(text: str, *, owner) -> ImportedRun:
    """A run YAML (or a TRL, open-r1, verl or Oumi config) read for ``owner``; one over MAX_BYTES is refused whole,
    by every route (the API, the CLI, the upload and the textarea all come here)."""
    out = ImportedRun()
    size = text_size(text)
    if size > MAX_BYTES:
        out.errors.append(too_large(size))
        return out
    if is_launch_script(text):  # verl's run_*.sh, pasted whole: its overrides are the config
        data, notes, errors = launch_script_mapping(text)
        out.notes += notes
        if errors:
            out.errors += errors
            return out
    else:
        try:
            data = load_yaml(text) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}: " if mark else ""
            out.errors.append(f"{where}not valid YAML ({getattr(exc, 'problem', exc)})")
            return out
        except RecursionError:
            out.errors.append("the YAML is nested too deeply to read")
            return out
    if not isinstance(data, dict):
        out.errors.append("the YAML must be a mapping of TRL field names to values")
        return out
    foreign = kind_of(data)
    if foreign:
        data, notes, errors = (from_verl_yaml if foreign == "verl" else from_oumi_yaml)(data)
        out.notes += notes
        out.errors += list(dict.fromkeys(errors))  # a key read twice (verl's GPUs) is refused once
        if errors:
            return out

    out.kind = str(data.get("trainer") or "grpo")
    if out.kind in ("trl", "verl"):  # the trainer: a GRPO run, by TRL or by verl
        out.trainer, out.kind = out.kind, "grpo"
    if out.kind not in KINDS:
        out.errors.append(f"trainer: must be one of {', '.join(KINDS)}, trl or verl, not {out.kind!r}")
        out.kind = "grpo"
    fields = kind_fields(out.kind)
    config_names, trl_config = (
        (trl_fields.SFT_CONFIG_FIELDS, "SFTConfig")
        if out.kind == "sft"
        else (trl_fields.grpo_config_fields(), "GRPOConfig")
    )
    data = _typed(data, out, config_names, fields)
    out.name = str(data.get("name") or "imported run")
    out.model = str(data.get("model_name_or_path") or data.get("model") or "tiny")
    if data.get("requested_gpus") is not None:
        out.requested_gpus = _number(data, "requested_gpus", out, int) or 0
    if "token_sample_groups" in data:
        out.token_sample_groups = _coerce("token_sample_groups", data["token_sample_groups"], out.errors, TOKEN_FIELDS)
    _engine(data, out)
    _dataset(data, owner, out)
    _rewards(data, owner, out)
    _tools(data, owner, out)
    _environment(data, owner, out)

    out.config = {name: f.default for name, f in fields.items()}
    given: dict[str, str] = {}  # the config fields the file set (translated ones too)
    fractions: dict[str, float] = {}
    for key, value in data.items():
        if key in SCRIPT_KEYS or key in RENAMED:
            continue
        f = fields.get(key) or EVAL_FIELDS.get(key)
        if f is not None and value is None and f.default is not None:
            out.notes.append(f"{key}: left empty; the default {f.default!r} is used")
        elif key in FRACTIONAL and isinstance(value, float) and 0 < value < 1:
            fractions[key] = value  # resolved once max_steps is known
            given[key] = FROM_FILE
        elif key == "scale_rewards" and isinstance(value, bool) and out.kind == "grpo":
            out.config[key] = "group" if value else "none"
            given[key] = FROM_FILE
            out.notes.append(
                f"scale_rewards: {value} is TRL's older boolean form; read as {out.config[key]!r}, as TRL does"
            )
        elif key in SFT_RENAMED and out.kind == "sft":
            new = SFT_RENAMED[key]
            if new in fields:
                out.config[new] = _coerce(new, value, out.errors, fields)
                given[new] = FROM_FILE
            else:
                out.extra[new] = value
            out.notes.append(f"{key}: SFTConfig's older name of {new}; read as {new}: {shown(value)}")
        elif key in fields:
            out.config[key] = _coerce(key, value, out.errors, fields)
            given[key] = FROM_FILE
        elif key in EVAL_FIELDS:  # eval_steps is TRL's name too: every N steps, on the eval split
            out.evaluation[key] = _coerce(key, value, out.errors)
        elif key == "eval_strategy" and value == "no":
            continue  # TRL's "no evaluation": _eval_strategy applies it
        elif key in MANAGED:
            out.notes.append(f"{key}: set by grpo-web for every run; the imported value is ignored")
        elif key in NOT_APPLIED:
            out.notes.append(f"{key}: {NOT_APPLIED[key]}")
        elif key in REWARD_PARAMETERS:
            reward, constant = REWARD_PARAMETERS[key]
            out.notes.append(
                f"{key}: a parameter of open-r1's {reward} reward; not applied here: your copy of "
                f"{reward} has it as {constant} in its code (set {constant} = {value!r} there)"
            )
        elif key in config_names:
            out.extra[key] = value
            out.notes.append(f"{key}: passed to {trl_config} as it is")
        elif is_verl_key(key):  # a verl file's key carried to verl as written (grpo_web_protocol.verl_carry)
            problem = run_yaml_key_problem(key, out.trainer)
            out.errors += [problem] if problem else []
            out.extra.update({} if problem else {key: value})
        elif out.kind == "grpo" and (key in SFT_RENAMED or key in trl_fields.SFT_CONFIG_FIELDS):
            out.notes.append(
                f"{key}: an SFTConfig field; a GRPO run does not use it (if this file is an SFT config, add "
                f"`trainer: sft`)"
            )
        else:
            out.errors.append(f"{key}: not a {trl_config} field nor a grpo-web key")
    if not data.get("reward_funcs") and out.kind == "grpo" and any(k in data for k in SFT_HINTS):
        out.errors.append(
            "trainer: this looks like an SFT config (it has "
            + ", ".join(k for k in SFT_HINTS if k in data)
            + " and no reward_funcs): add `trainer: sft` to train it with TRL's SFTTrainer"
        )
    for key in ("vllm_device", "num_train_epochs", "warmup_ratio"):  # translated into config fields
        if data.get(key) is not None:
            given.update(dict.fromkeys(TRANSLATED_INTO[key], FROM_FILE))
    _translate(data, out)
    _fractions(fractions, out)
    _eval_strategy(data, out)
    out.sources = {k: v for k, v in config_sources(out.kind, given).items() if k in out.config}
    return out


# The config fields a removed or renamed key is translated into (_translate)
TRANSLATED_INTO = {"vllm_device": ("vllm_mode",), "num_train_epochs": ("max_steps",), "warmup_ratio": ("warmup_steps",)}


# Keys that say a config is for SFTTrainer (the hint to add ``trainer: sft``)
SFT_HINTS = ("max_seq_length", "max_length", "packing", "dataset_text_field", "use_liger", "completion_only_loss")


def _eval_strategy(data: dict, out: ImportedRun) -> None:
    """``eval_strategy: 'no'`` (TRL's default, said outright): TRL evaluates never, whatever eval_steps says; so no
    periodic evaluation here either."""
    if data.get("eval_strategy") != "no":
        return
    steps = out.evaluation.get("eval_steps")
    if steps:
        out.evaluation["eval_steps"] = 0
        out.notes.append(
            f"eval_strategy: 'no' turns evaluation off in TRL, whatever eval_steps says; so no periodic evaluation "
            f"(eval_steps: {steps} not applied; set eval_strategy: steps to evaluate every eval_steps)"
        )
    else:
        out.notes.append("eval_strategy: 'no': no periodic evaluation, as in TRL")


def _fractions(fractions: dict[str, float], out: ImportedRun) -> None:
    """``save_steps``/``eval_steps`` below 1: a share of the run's steps, resolved as transformers does
    (TrainerState.compute_steps: ceil(max_steps x share))."""
    steps = out.config.get("max_steps")
    for key, share in fractions.items():
        if not isinstance(steps, int) or steps < 1:
            out.errors.append(f"{key}: {share} is a share of max_steps, and max_steps is not set")
            continue
        value = math.ceil(steps * share)
        (out.evaluation if key in EVAL_FIELDS else out.config)[key] = value
        out.notes.append(
            f"{key}: {share} is a share of the run's {steps} steps (as in transformers); resolved to {value}"
        )


def _number(data: dict, key: str, out: ImportedRun, convert=float):
    """``data[key]`` as a number (a whole one where ``convert`` is int), or None with an error naming the key: 3.9
    is not a whole number, true is not a number."""
    try:
        return convert(trl_value(key, data[key], ("int",) if convert is int else ("float",)))
    except WrongType as exc:
        out.errors.append(str(exc))
        return None


def _translate(data: dict, out: ImportedRun) -> None:
    """Fields newer transformers or TRL removed or renamed, carried over where a faithful translation exists."""
    ratio = _number(data, "warmup_ratio", out) if data.get("warmup_ratio") is not None else None
    if ratio is not None and out.kind != "sft":
        # transformers 5 folded warmup_ratio into warmup_steps: a float below 1 is a share of the steps
        out.extra["warmup_steps"] = ratio
        out.notes.append(
            f"warmup_ratio: transformers 5 removed it; translated to warmup_steps: "
            f"{ratio} (a value below 1 is the same share of the steps)"
        )
    if "max_prompt_length" in data:
        out.notes.append(
            "max_prompt_length: TRL 1.x removed it (the trainer no longer cuts prompts); dropped: "
            "prompts reach the model whole, so keep them short in the dataset"
        )
    if data.get("num_processes") is not None and not data.get("requested_gpus"):
        processes = _number(data, "num_processes", out, int)
        if processes is not None:
            out.requested_gpus = processes
            out.notes.append(
                f"num_processes: accelerate's launch setting; translated to requested_gpus: "
                f"{out.requested_gpus} (the worker starts one training process per GPU)"
            )
    if "vllm_device" in data:
        out.config["vllm_mode"] = "server"
        out.notes.append(
            f"vllm_device: TRL removed it ({shown(data['vllm_device'])} put vLLM on a GPU of its own); "
            f"translated to vllm_mode: server, in which the worker starts TRL's vLLM server on a GPU "
            f"of its own"
        )
    _steps(data, out)
    if ratio is not None and out.kind == "sft":
        # SFTConfig has warmup_steps as a run field: the share resolved as transformers does (get_warmup_steps)
        steps = out.config.get("max_steps")
        if ratio >= 1 or not isinstance(steps, int) or steps < 1:
            out.errors.append(f"warmup_ratio: {ratio} is not a share (from 0 to 1) of a set max_steps")
        else:
            out.config["warmup_steps"] = math.ceil(steps * ratio)
            out.notes.append(
                f"warmup_ratio: transformers 5 removed it; {ratio} of the run's {steps} steps is warmup_steps: "
                f"{out.config['warmup_steps']} (as transformers rounds it)"
            )


def _steps(data: dict, out: ImportedRun) -> None:
    """``max_steps: -1`` (TRL's default, so also none) with ``num_train_epochs``: the steps the epochs take."""
    # the file's max_steps; with neither key, the default's (TRL's -1: by epochs)
    steps = out.config.get("max_steps") if "max_steps" in data or "num_train_epochs" not in data else None
    if isinstance(steps, int) and steps > 0:
        if "num_train_epochs" in data:
            out.notes.append("num_train_epochs: max_steps is set, and wins (as in TRL)")
        return
    # max_steps -1 (TRL's "by epochs", its default): as many steps as the epochs take, 3 by transformers' default
    epochs = _number(data, "num_train_epochs", out) if data.get("num_train_epochs") is not None else EPOCHS
    version = out.dataset_version
    if version is None or epochs is None:
        return
    if epochs <= 0:
        out.errors.append(f"num_train_epochs: {epochs:g} trains no step")
        return
    cfg = out.config
    if out.trainer == "verl":
        # verl's step is one data.train_batch_size of prompts, its dataloader drops the last partial batch
        per_step = _verl_prompts_per_step(out)
        cfg["max_steps"] = max(1, version.train_rows // per_step) * max(1, int(epochs))
        out.notes.append(
            f"trainer.total_epochs: {epochs:g} epochs of {version.train_rows // per_step or 1} steps "
            f"({version.train_rows} training prompts // {per_step} a step, as verl's dataloader drops the last "
            f"partial batch); max_steps: {cfg['max_steps']}"
        )
        return
    cfg["max_steps"], prompts_per_step = epoch_steps(
        cfg, train_rows=version.train_rows, gpus=out.requested_gpus, epochs=epochs
    )
    said = "max_steps: -1" if "max_steps" in data else "max_steps: left out, so TRL's default -1,"
    out.notes.append(
        f"{said} trains for num_train_epochs={epochs:g}; translated to max_steps: "
        f"{cfg['max_steps']} ({version.train_rows} training prompts x {epochs:g} epochs / "
        f"{prompts_per_step} prompts a step)"
    )


EPOCHS = 3.0  # transformers' num_train_epochs default: what max_steps -1 trains for


def epoch_steps(cfg: dict, *, train_rows: int, gpus: int, epochs: float = EPOCHS) -> tuple[int, int]:
    """(the optimizer steps ``epochs`` passes over ``train_rows`` take, the prompts (an SFT run: rows) of one step):
    each step takes B x GA completions per process, G of them per prompt."""
    per_step = max(
        1,
        cfg["per_device_train_batch_size"]
        * cfg["gradient_accumulation_steps"]
        * max(1, gpus)
        // max(1, cfg.get("num_generations") or 1),
    )
    return max(1, math.ceil(train_rows * epochs / per_step)), per_step


def _verl_prompts_per_step(out: ImportedRun) -> int:
    """Prompts behind one verl training step (data.train_batch_size), from the fields the verl import set."""
    cfg = out.config
    spg = cfg.get("steps_per_generation") or cfg["gradient_accumulation_steps"]
    return max(
        1,
        cfg["per_device_train_batch_size"]
        * spg
        * max(1, out.requested_gpus)
        // max(1, cfg.get("num_generations") or 1),
    )


def _engine(data: dict, out: ImportedRun) -> None:
    """``engine`` (local or ray) and ``num_workers``; each bad value is an error naming its key."""
    engine = data.get("engine", "local")
    if engine not in ("local", "ray"):
        out.errors.append(f"engine: must be local or ray, not {engine!r}")
    else:
        out.engine = engine
    workers = data.get("num_workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 256:
        out.errors.append(f"num_workers: {shown(workers)} is not a whole number from 1 to 256")
    elif workers > 1 and out.engine != "ray":
        out.errors.append("num_workers: only a Ray run has several workers (engine: ray)")
    else:
        out.num_workers = workers


def _dataset(data: dict, owner, out: ImportedRun) -> None:
    """The dataset version by name (a Hub id matches a dataset named by its last part); a recipe's prompt column and
    system prompt pick the version mapped that way, or make it (a new mapping of the same rows)."""
    dataset_name = data.get("dataset_name")
    versions = visible_versions(owner).select_related("dataset")
    if dataset_name in (None, ""):
        yours = sorted(set(versions.values_list("dataset__name", flat=True)))[:10]
        out.errors.append(
            "dataset_name: not given; name the dataset to train on"
            + (f" (yours: {', '.join(yours)})" if yours else " (import one on the Datasets page first)")
        )
        return
    named = versions.filter(dataset__name=dataset_name)
    if not named.exists() and isinstance(dataset_name, str) and "/" in dataset_name:
        named = versions.filter(dataset__name=dataset_name.rsplit("/", 1)[1])
    if data.get("dataset_version") is not None:
        number = data["dataset_version"]
        if isinstance(number, bool) or not isinstance(number, int):
            out.errors.append(f"dataset_version: {number!r} is not a version number")
            return
        named = named.filter(number=number)
    else:
        # a name without a version: the user's own versions, not one an earlier import mapped for its recipe
        users = user_made(named)
        named = users if users.exists() else named
    version = named.order_by("-number").first()
    if version is None:
        out.errors.append(
            f"dataset_name: you have no dataset named {dataset_name!r}"
            + (f" with version {data['dataset_version']}" if data.get("dataset_version") else "")
        )
        return
    column, system = data.get("dataset_prompt_column"), data.get("system_prompt")
    for key in ("dataset_train_split", "dataset_test_split"):
        if key in data:
            out.notes.append(
                f"{key}: not applied: the version's own split decides (train {version.train_rows} rows, "
                f"eval {version.eval_rows}); set it on the dataset's mapping page"
            )
    if column is None and system is None:
        out.dataset_version = version
        return
    column = str(column or version.prompt_column)
    if column not in version.columns:
        out.errors.append(
            f"dataset_prompt_column: {version.dataset.name} has no column {column!r} (its columns: "
            f"{', '.join(version.columns)})"
        )
        return
    wanted = Mapping(
        prompt_column=column,
        prompt_format="conversational" if system else version.prompt_format,
        system_prompt=str(system or ""),
        reward_columns=tuple(c for c in version.columns if c != column and c not in RESERVED),
        split=version.split,
        eval_fraction=version.eval_fraction,
        split_seed=version.split_seed,
        split_column=version.split_column,
    )
    match = next(
        (v for v in version.dataset.versions.order_by("-number") if Mapping.of(v) == wanted and not v.prompt_template),
        None,
    )
    if match is None:
        if (
            version.dataset.owner_id != owner.pk
            and not version.dataset.shares.filter(team__user=owner, can_write=True).exists()
        ):
            out.errors.append(
                f"dataset_prompt_column / system_prompt: no version of {version.dataset.name} is mapped "
                f"this way, and you may not add one to it"
            )
            return
        try:
            match = dataset_version_map(version=version, mapping=wanted)
        except DatasetError as exc:
            out.errors += [f"dataset_prompt_column / system_prompt: {e}" for e in exc.errors]
            return
        match.provenance = {"kind": "import", "keys": "dataset_prompt_column / system_prompt"}
        match.save(update_fields=["provenance"])
        out.notes.append(
            f"dataset_prompt_column / system_prompt: made version {match.number} of "
            f"{version.dataset.name}: the prompt from column {column!r}"
            + (", after the recipe's system prompt, as chat messages" if system else "")
        )
    out.dataset_version = match


def _rewards(data: dict, owner, out: ImportedRun) -> None:
    names = data.get("reward_funcs") or []
    names = [names] if isinstance(names, str) else names
    weights = data.get("reward_weights") or [1.0] * len(names) if isinstance(names, list) else []
    pinned = data.get("reward_versions") or [None] * len(names) if isinstance(names, list) else []
    for key, value in (("reward_funcs", names), ("reward_weights", weights), ("reward_versions", pinned)):
        if not isinstance(value, list):
            out.errors.append(f"{key}: a list, one entry per reward function")
            return
    if not all(isinstance(n, str) for n in names):
        out.errors.append("reward_funcs: a list of reward function names")
        return
    if not all(n is None or (isinstance(n, int) and not isinstance(n, bool)) for n in pinned):
        out.errors.append("reward_versions: a list of version numbers (or null for the latest)")
        return
    if not names and out.kind == "grpo":
        out.errors.append("reward_funcs: name at least one of your reward functions")
    if len(weights) != len(names) or len(pinned) != len(names):
        out.errors.append("reward_weights / reward_versions: one value per entry of reward_funcs")
        return
    try:  # TRL's reward_weights: list[float]
        weights = [trl_value("reward_weights", w, ("float",)) for w in weights]
    except WrongType as exc:
        out.errors.append(str(exc))
        return
    visible = RewardFunction.objects.visible_to(owner)
    for name, weight, number in zip(names, weights, pinned):
        name = str(name)
        if name in REWARD_ALIASES and not visible.filter(name=name).exists():
            out.notes.append(
                f"reward_funcs: open-r1's {name!r} reward runs code in E2B or Morph sandboxes; mapped to "
                f"grpo-web's {REWARD_ALIASES[name]!r}, which runs each of the row's tests in its own "
                f"sandboxed process and scores the share that pass"
            )
            name = REWARD_ALIASES[name]
        if name in TRUSTED and not visible.filter(name=name).exists():
            out.rewards.append({"name": name, "weight": float(weight), "builtin": name})
            continue
        if not visible.filter(name=name).exists() and name in LIBRARY:
            reward_builtins_install(owner=owner, names=[name])
            out.notes.append(
                f"reward_funcs: made your copy of the library's {name!r} reward"
                + (" (open-r1's, same name and behaviour)" if name in OPEN_R1 else "")
                + (" (Oumi's, same name and behaviour)" if name in OUMI else "")
            )
        # the user's own function first, then one a team shares with them
        rf = visible.filter(name=name).order_by(Case(When(owner=owner, then=0), default=1), "pk").first()
        version = rf and (rf.versions.filter(number=number).first() if number else rf.latest_version)
        if version is None:
            out.errors.append(
                f"reward_funcs: you have no reward function {name!r}"
                + (f" with version {number}" if number else "")
                + _what_to_paste(name)
            )
            continue
        out.rewards.append(
            {"name": rf.name, "weight": float(weight), "version_id": version.pk, "version": version.number}
        )


def _what_to_paste(name: str) -> str:
    """For a reward named as TRL's CLI names one (an import path, or one of TRL's factories that return a reward
    function, a closure): what to write in grpo-web instead, since grpo-web runs only rewards written in it."""
    last = name.rpartition(".")[2]
    if last.startswith(("get_", "make_")) or last in CLOSURE_FACTORIES:
        short = last.removeprefix("get_").removeprefix("make_") or "reward"
        return (
            f". {last!r} makes a reward function (a closure, as TRL's docs build rewards that take settings): "
            f"paste its source into a new reward named {short!r} and end the source with "
            f"`{short} = {last}(...)`, your settings as arguments; then name {short!r} here"
        )
    if "." in name:
        return (
            f". {name!r} is an import path (TRL's CLI imports it): paste the function's source into a new reward "
            f"named {last!r} (Rewards, New) and name {last!r} here; a class's instance or a closure is made at the "
            f"end of that source (`{last} = ...`)"
        )
    return ""


# TRL's reward factories (trl.rewards): each returns the reward function, its settings closed over
CLOSURE_FACTORIES = ("get_cosine_scaled_reward", "get_repetition_penalty_reward", "get_soft_overlong_punishment")


def _tools(data: dict, owner, out: ImportedRun) -> None:
    """``tools: [calculator, ...]``: the user's tools (their own, or shared with them) at their latest version, or
    the library's."""
    names = data.get("tools") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        out.errors.append("tools: a list of tool names, such as [calculator]")
        return
    if names and out.kind == "sft":
        out.errors.append("tools: an SFT run has no tools (a GRPO run's model calls them as it generates)")
        return
    visible = RewardFunction.objects.visible_to(owner)
    for name in names:
        own_first = sorted(
            visible.filter(name=name, kind=RewardFunction.Kind.TOOL), key=lambda rf: rf.owner_id != owner.pk
        )
        version = own_first[0].latest_version if own_first else None
        if version is not None:
            out.tools.append({"name": name, "version_id": version.pk, "version": version.number})
        elif name in TOOLS:
            out.tools.append({"name": name, "builtin": name})
        elif visible.filter(name=name).exists():
            out.errors.append(f"tools: {name!r} is a reward function, not a tool")
        else:
            out.errors.append(f"tools: you have no tool {name!r} (the library's: {', '.join(TOOLS)})")


def _environment(data: dict, owner, out: ImportedRun) -> None:
    """``environment: calculator_session``: the user's environment (their own, or shared with them) at its latest
    version, or the library's. At most one per run."""
    name = data.get("environment")
    if name in (None, ""):
        return
    if not isinstance(name, str):
        out.errors.append("environment: one environment's name, such as calculator_session")
        return
    if out.kind == "sft":
        out.errors.append("environment: an SFT run has no environment (a GRPO run's model calls its tools)")
        return
    visible = RewardFunction.objects.visible_to(owner)
    own_first = sorted(
        visible.filter(name=name, kind=RewardFunction.Kind.ENVIRONMENT), key=lambda rf: rf.owner_id != owner.pk
    )
    version = own_first[0].latest_version if own_first else None
    if version is not None:
        out.environment = {"name": name, "version_id": version.pk, "version": version.number}
    elif name in ENVIRONMENTS:
        out.environment = {"name": name, "builtin": name}
    elif visible.filter(name=name).exists():
        out.errors.append(f"environment: {name!r} is not an environment (a reward function or a tool)")
    else:
        out.errors.append(f"environment: you have no environment {name!r} (the library's: {', '.join(ENVIRONMENTS)})")
