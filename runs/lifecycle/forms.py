"""The run form: model, dataset version, pinned reward versions with weights, GRPOConfig (an SFT run: SFTConfig) and
evaluation settings."""

import json

from django import forms
from grpo_web_protocol import trl_fields
from grpo_web_protocol.config import (
    EVAL_FIELDS,
    FROM_FILE,
    FROM_FORM,
    GRPO_FIELDS,
    TOKEN_FIELDS,
    default_source,
    kind_fields,
    kind_groups,
)

from rewards.builtins import TRUSTED
from rewards.library import ENVIRONMENTS as LIBRARY_ENVIRONMENTS
from rewards.library import TOOLS as LIBRARY_TOOLS
from rewards.library import source as library_source
from rewards.models import RewardFunction
from rewards.services import docstring
from runs.access import visible_versions
from runs.datasets.demo import QUICK_START_DATASET, WORKED_ANSWERS_DATASET, form_default
from runs.forms import JSONObjectField, config_field
from runs.lifecycle.trl_yaml import MANAGED
from runs.models import DatasetVersion

# GRPOConfig fields not offered as they are: grpo-web sets them for every run (workers/training/train.py), takes them from
# another part of the form (the rewards table's weights), or does not apply them (runs.lifecycle.trl_yaml notes why)
NOT_ON_FORM = MANAGED | {
    "reward_weights",
    "resume_from_checkpoint",
    "push_to_hub",
    "hub_model_id",
    "hub_strategy",
    "hub_token",
    "hub_private_repo",
    "hub_revision",
    "hub_always_push",
    "vllm_server_host",
    "vllm_server_port",
    "vllm_server_base_url",
    "eval_strategy",
    "do_eval",
    "do_train",
    "do_predict",
    "trust_remote_code",
    "local_rank",
    "deepspeed",
    "fsdp",
    "fsdp_config",
    "accelerator_config",
    "parallelism_config",
    "log_completions_hub_repo",
    "trackio_space_id",
    "trackio_bucket_id",
    "trackio_static_space_id",
    "project",
    "eval_steps",
    "bf16",
    "fp16",
}


def _trl_form_field(f: dict) -> forms.Field:
    """A form field for one GRPOConfig field of TRL's schema; blank keeps TRL's default."""
    default = f["default"]
    shown = json.dumps(default) if f["kind"] == "json" else default
    common = {"required": False, "label": f["name"], "help_text": (f["help"] or "")[:400]}
    if f["kind"] == "bool" or f["choices"]:
        values = ["true", "false"] if f["kind"] == "bool" else f["choices"]
        return forms.ChoiceField(choices=[("", f"TRL's default ({shown})")] + [(v, v) for v in values], **common)
    attrs = {"placeholder": "" if default is None else str(shown)[:60]}
    if f["kind"] == "int":
        return forms.IntegerField(widget=forms.NumberInput(attrs=attrs), **common)
    if f["kind"] == "float":
        return forms.FloatField(widget=forms.NumberInput(attrs={**attrs, "step": "any"}), **common)
    return forms.CharField(max_length=20000, strip=True, widget=forms.TextInput(attrs=attrs), **common)


def _trl_value(f: dict, value):
    """The cleaned form value as GRPOConfig takes it; ValueError (with the reason) for bad JSON."""
    if f["kind"] == "bool":
        return value == "true"
    if f["kind"] == "json":
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:  # its own text adds "(char N)", counted from 0: people count from 1
            raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
        except RecursionError:
            raise ValueError("not JSON a config takes: nested too deeply") from None
    return value


def _trl_initial(f: dict, value):
    if f["kind"] == "bool":
        return "true" if value else "false"
    return json.dumps(value) if f["kind"] == "json" else value


class RunForm(forms.Form):
    """A run: model, dataset version, pinned reward versions with weights, and GRPOConfig grouped as TRL documents it.

    ``kind`` "sft": SFTConfig's fields instead of GRPOConfig's, and the reward functions are optional (they score
    the evaluations only). ``run`` pre-fills everything from an existing run (clone with edits)."""

    name = forms.CharField(max_length=200)
    model = forms.CharField(
        max_length=500,
        initial="tiny",
        help_text="'tiny' for the local demo model ('tiny-sft': the same after a short cold-start "
        "SFT, it answers now and then), a Hugging Face hub id (org/name), or the folder of a model you may "
        "load: a run's output or export of yours or shared with you, or one under GRPO_MODEL_ROOTS.",
    )
    dataset_version = forms.ModelChoiceField(queryset=DatasetVersion.objects.none())
    requested_gpus = forms.IntegerField(
        min_value=0,
        max_value=64,
        initial=0,
        label="GPUs",
        help_text="0 runs on a CPU worker; N waits for a worker with N GPUs.",
    )
    engine = forms.ChoiceField(
        choices=[("local", "local"), ("ray", "Ray")],
        initial="local",
        label="Engine",
        required=False,
        help_text="local: one worker trains the run on its own machine (one process per GPU). "
        "Ray: a worker started with RAY_ADDRESS submits it to its Ray cluster as a "
        "Ray job (the manual: /docs/ray/).",
    )
    num_workers = forms.IntegerField(
        min_value=1,
        max_value=256,
        initial=1,
        label="Ray workers",
        required=False,
        help_text="Ray Train workers of a Ray run, trained as one DDP group (each with "
        "a GPU when the run asks for GPUs); 1 for a local run.",
    )
    trainer = forms.ChoiceField(
        choices=[("trl", "TRL"), ("verl", "verl")],
        initial="trl",
        required=False,
        help_text="TRL's GRPOTrainer, or verl's GRPO on Ray with vLLM rollout (GPU workers "
        "with verl and vLLM); the same fields, translated to verl's keys.",
    )
    queue_anyway = forms.BooleanField(
        required=False, label="Queue anyway", help_text="Queue even though no online worker has these GPUs or vLLM yet."
    )
    config_extra = JSONObjectField(
        required=False,
        initial=dict,
        widget=forms.HiddenInput,
        help_text="Further GRPOConfig fields from an imported TRL config.",
    )
    config_origin = JSONObjectField(
        required=False,
        initial=dict,
        widget=forms.HiddenInput,
        help_text="The config values an imported file (or the run cloned) set, each as [source, value]: a value "
        "still the same when the form is sent keeps that source.",
    )

    def __init__(self, *args, owner, run=None, imported=None, kind="grpo", **kwargs):
        super().__init__(*args, **kwargs)
        self.kind = run.kind if run is not None else kind
        self.config_fields = kind_fields(self.kind)
        self.fields["dataset_version"].queryset = (
            visible_versions(owner).select_related("dataset").order_by("-created_at")
        )
        if not self.initial.get("dataset_version"):
            # the README's quick start (the demo's arithmetic; worked answers for SFT) by name, not the latest upload
            versions = self.fields["dataset_version"].queryset
            wanted = WORKED_ANSWERS_DATASET if self.kind == "sft" else QUICK_START_DATASET
            default = form_default(versions, owner, wanted)
            self.initial["dataset_version"] = default.pk if default else None
        # the user's own functions first, then those teams share with them (a shared one may carry the same name)
        visible = sorted(
            (
                rf
                for rf in RewardFunction.objects.visible_to(owner).select_related("owner").prefetch_related("versions")
                if rf.versions.all()
            ),
            key=lambda rf: (rf.owner_id != owner.pk, rf.name, rf.pk),
        )
        self.reward_functions = [rf for rf in visible if rf.kind == RewardFunction.Kind.REWARD]
        # tools (TRL's tools): the user's and shared ones, pinned to a version, and the library's
        self.tool_functions = (
            [rf for rf in visible if rf.kind == RewardFunction.Kind.TOOL] if self.kind != "sft" else []
        )
        for rf in self.tool_functions:
            numbers = sorted((v.number for v in rf.versions.all()), reverse=True)
            self.fields[f"tool_{rf.pk}"] = forms.BooleanField(
                required=False, label=rf.name, widget=forms.CheckboxInput(attrs={"aria-label": f"use tool {rf.name}"})
            )
            self.fields[f"tool_version_{rf.pk}"] = forms.TypedChoiceField(
                choices=[(n, f"v{n}") for n in numbers],
                coerce=int,
                initial=numbers[0],
                label=f"{rf.name} version",
                widget=forms.Select(attrs={"aria-label": f"tool {rf.name} version"}),
            )
        # an environment (TRL's environment_factory): at most one, the user's or a shared one at its latest version,
        # or the library's
        self.environment_functions = (
            [rf for rf in visible if rf.kind == RewardFunction.Kind.ENVIRONMENT] if self.kind != "sft" else []
        )
        if self.kind != "sft":
            self.fields["environment"] = forms.ChoiceField(
                required=False,
                label="Environment",
                choices=[("", "none")]
                + [
                    (
                        f"fn:{rf.pk}",
                        f"{rf.name} v{rf.latest_version.number}"
                        + ("" if rf.owner_id == owner.pk else f" (shared by {rf.owner.username})"),
                    )
                    for rf in self.environment_functions
                ]
                + [(f"builtin:{name}", f"{name} (built-in)") for name in LIBRARY_ENVIRONMENTS],
                help_text="A class whose methods the model calls as tools, one instance per rollout (TRL's "
                "environment_factory); its get_reward, if any, is a reward named after the class.",
            )
        for name in LIBRARY_TOOLS if self.kind != "sft" else []:
            self.fields[f"tool_builtin_{name}"] = forms.BooleanField(
                required=False, label=name, widget=forms.CheckboxInput(attrs={"aria-label": f"use tool {name}"})
            )
        for rf in self.reward_functions:
            numbers = sorted((v.number for v in rf.versions.all()), reverse=True)
            # the table's cells have no <label>: each input carries its name (aria-label)
            self.fields[f"reward_{rf.pk}"] = forms.BooleanField(
                required=False, label=rf.name, widget=forms.CheckboxInput(attrs={"aria-label": f"use {rf.name}"})
            )
            self.fields[f"weight_{rf.pk}"] = forms.FloatField(
                initial=1.0,
                label=f"{rf.name} weight",
                widget=forms.NumberInput(attrs={"aria-label": f"{rf.name} weight"}),
            )
            self.fields[f"version_{rf.pk}"] = forms.TypedChoiceField(
                choices=[(n, f"v{n}") for n in numbers],
                coerce=int,
                initial=numbers[0],
                label=f"{rf.name} version",
                widget=forms.Select(attrs={"aria-label": f"{rf.name} version"}),
            )
        for name in TRUSTED:  # built-ins with no copy of their own (code_tests drives its own sandbox)
            self.fields[f"builtin_{name}"] = forms.BooleanField(
                required=False, label=name, widget=forms.CheckboxInput(attrs={"aria-label": f"use {name}"})
            )
            self.fields[f"builtin_{name}_weight"] = forms.FloatField(
                initial=1.0, label=f"{name} weight", widget=forms.NumberInput(attrs={"aria-label": f"{name} weight"})
            )
        for name, f in self.config_fields.items():
            self.fields[name] = config_field(name, f)
        # every other field of the installed TRL's GRPOConfig, from its schema: a new TRL option appears here
        self.trl_schema = (
            [f for f in trl_fields.GRPO_SCHEMA if f["name"] not in GRPO_FIELDS and f["name"] not in NOT_ON_FORM]
            if self.kind == "grpo"
            else []
        )
        for f in self.trl_schema:
            self.fields[f"trl_{f['name']}"] = _trl_form_field(f)
        for name, f in EVAL_FIELDS.items():  # optional: blank keeps the default
            self.fields[name] = config_field(name, f)
            self.fields[name].required = False
        for name, f in TOKEN_FIELDS.items():  # grpo-web's own: the token-level view's sample
            self.fields[name] = config_field(name, f)
            self.fields[name].required = False
        source = run or imported
        if source is not None:
            self._prefill(source, clone=run is not None)

    def _prefill(self, source, clone: bool):
        by_name = {rf.name: rf for rf in reversed(self.reward_functions)}  # the user's own wins a shared name
        extra = getattr(source, "config_extra", None) or getattr(source, "extra", None) or {}
        self.initial.update(
            {
                "model": source.model,
                "requested_gpus": source.requested_gpus,
                "engine": source.engine,
                "num_workers": source.num_workers,
                "trainer": getattr(source, "trainer", "trl") or "trl",
                **source.config,
                **(source.evaluation or {}),
                "config_extra": extra,
            }
        )
        sources = getattr(source, "sources", None) or getattr(source, "config_sources", None) or {}
        self.initial["config_origin"] = {
            name: [sources[name], value]
            for name, value in source.config.items()
            if sources.get(name) in (FROM_FILE, FROM_FORM)
        }
        if getattr(source, "token_sample_groups", None) is not None:
            self.initial["token_sample_groups"] = source.token_sample_groups
        self.initial["name"] = f"{source.name} (clone)" if clone else source.name
        for f in self.trl_schema:
            if f["name"] in extra:
                self.initial[f"trl_{f['name']}"] = _trl_initial(f, extra[f["name"]])
        if source.dataset_version is not None:
            self.initial["dataset_version"] = source.dataset_version.pk
        tools_by_name = {rf.name: rf for rf in reversed(self.tool_functions)}
        for t in getattr(source, "tools", None) or []:
            if t.get("builtin") and f"tool_builtin_{t['builtin']}" in self.fields:
                self.initial[f"tool_builtin_{t['builtin']}"] = True
            elif t["name"] in tools_by_name:
                rf = tools_by_name[t["name"]]
                self.initial.update(
                    {
                        f"tool_{rf.pk}": True,
                        f"tool_version_{rf.pk}": t.get("version") or self.fields[f"tool_version_{rf.pk}"].initial,
                    }
                )
        environment = getattr(source, "environment", None) or {}
        if environment and "environment" in self.fields:
            by_env_name = {rf.name: rf for rf in reversed(self.environment_functions)}
            if environment.get("builtin"):
                self.initial["environment"] = f"builtin:{environment['builtin']}"
            elif environment["name"] in by_env_name:
                self.initial["environment"] = f"fn:{by_env_name[environment['name']].pk}"
        for r in source.rewards:
            if r.get("builtin") in TRUSTED:
                self.initial.update({f"builtin_{r['builtin']}": True, f"builtin_{r['builtin']}_weight": r["weight"]})
                continue
            rf = by_name.get(r["name"])
            if rf:
                self.initial.update(
                    {
                        f"reward_{rf.pk}": True,
                        f"weight_{rf.pk}": r["weight"],
                        f"version_{rf.pk}": r.get("version") or self.fields[f"version_{rf.pk}"].initial,
                    }
                )

    def _config_sources(self, config: dict, origin: dict) -> dict:
        """Where each value the form sends came from: the file (or the cloned run) when it is still that file's
        value, the default's source when it is the default, else the form."""
        sources = {}
        for name, value in config.items():
            o = origin.get(name)
            if isinstance(o, list) and len(o) == 2 and o[0] in (FROM_FILE, FROM_FORM) and o[1] == value:
                sources[name] = o[0]
            elif value == self.config_fields[name].default:
                sources[name] = default_source(name)
            else:
                sources[name] = FROM_FORM
        return sources

    def builtin_rows(self):
        """(checkbox, weight, name, description) of the trusted built-ins, for the template."""
        return [(self[f"builtin_{name}"], self[f"builtin_{name}_weight"], name, text) for name, text in TRUSTED.items()]

    def tool_rows(self):
        """(checkbox, version or None, name, reward function or None, description) of the tools, for the template."""
        rows = [
            (self[f"tool_{rf.pk}"], self[f"tool_version_{rf.pk}"], rf.name, rf, rf.description)
            for rf in self.tool_functions
        ]
        return rows + [
            (self[f"tool_builtin_{name}"], None, name, None, docstring(library_source(name), name))
            for name in LIBRARY_TOOLS
            if f"tool_builtin_{name}" in self.fields
        ]

    def reward_rows(self):
        """(checkbox, weight, version, reward function) for the template."""
        return [
            (self[f"reward_{rf.pk}"], self[f"weight_{rf.pk}"], self[f"version_{rf.pk}"], rf)
            for rf in self.reward_functions
        ]

    @property
    def is_sft(self) -> bool:
        return self.kind == "sft"

    def grpo_groups(self):
        """[(group, [bound fields])] of the kind's config (GRPOConfig or SFTConfig) in TRL's documented order."""
        return [
            (group, [self[name] for name, f in self.config_fields.items() if f.metadata["group"] == group])
            for group in kind_groups(self.kind)
        ]

    def trl_groups(self):
        """[(TRL's group, [bound fields])] of every other GRPOConfig field, TRL's own groups first."""
        groups: dict[str, list] = {}
        for f in self.trl_schema:
            groups.setdefault(f["group"], []).append(self[f"trl_{f['name']}"])
        return sorted(groups.items(), key=lambda item: item[0] == trl_fields.INHERITED)

    def eval_fields(self):
        return [self[name] for name in EVAL_FIELDS]

    def token_fields(self):
        return [self[name] for name in TOKEN_FIELDS] if not self.is_sft else []

    def clean(self):
        data = super().clean()
        chosen = [rf for rf in self.reward_functions if data.get(f"reward_{rf.pk}")]
        builtins = [name for name in TRUSTED if data.get(f"builtin_{name}")]
        if not chosen and not builtins and not self.is_sft:
            raise forms.ValidationError("Pick at least one reward function.")
        names = [rf.name for rf in chosen] + builtins
        for name in sorted({n for n in names if names.count(n) > 1}):
            # TRL logs each function as rewards/<name>/mean: two of one name would write one curve
            self.add_error(None, f"Two reward functions are named {name!r} (yours and a shared one): pick one.")
        data["rewards"] = []
        for rf in chosen:
            number, weight = data.get(f"version_{rf.pk}"), data.get(f"weight_{rf.pk}")
            version = next((v for v in rf.versions.all() if v.number == number), None)
            if version is None or weight is None:
                continue  # the version or weight field carries its own error
            data["rewards"].append(
                {"name": rf.name, "weight": weight, "version_id": version.pk, "version": version.number}
            )
        for name in builtins:
            weight = data.get(f"builtin_{name}_weight")
            if weight is not None:
                data["rewards"].append({"name": name, "weight": weight, "builtin": name})
        data["tools"] = []
        for rf in self.tool_functions:
            if data.get(f"tool_{rf.pk}"):
                version = next((v for v in rf.versions.all() if v.number == data.get(f"tool_version_{rf.pk}")), None)
                if version is not None:
                    data["tools"].append({"name": rf.name, "version_id": version.pk, "version": version.number})
        data["tools"] += [{"name": name, "builtin": name} for name in LIBRARY_TOOLS if data.get(f"tool_builtin_{name}")]
        picked = data.get("environment") or ""
        data["environment"] = {}
        if picked.startswith("builtin:"):
            data["environment"] = {"name": picked[8:], "builtin": picked[8:]}
        elif picked.startswith("fn:"):
            rf = next(rf for rf in self.environment_functions if f"fn:{rf.pk}" == picked)
            version = rf.latest_version
            data["environment"] = {"name": rf.name, "version_id": version.pk, "version": version.number}
        data["config"] = {name: data.get(name) for name in self.config_fields}
        data["config_sources"] = self._config_sources(data["config"], data.get("config_origin") or {})
        data["kind"] = self.kind
        data["trainer"] = data.get("trainer") or "trl"
        if self.is_sft and data["trainer"] != "trl":
            self.add_error("trainer", "An SFT run trains with TRL.")
        # the other GRPOConfig fields: what the form shows wins over what came in hidden (an imported config)
        extra = {
            k: v
            for k, v in (data.get("config_extra") or {}).items()
            if f"trl_{k}" not in self.fields and k not in self.config_fields
        }
        for f in self.trl_schema:
            value = data.get(f"trl_{f['name']}")
            if value in (None, ""):
                continue
            try:
                extra[f["name"]] = _trl_value(f, value)
            except ValueError as exc:
                self.add_error(f"trl_{f['name']}", str(exc))
        data["config_extra"] = extra
        data["evaluation"] = {
            name: f.default if data.get(name) in (None, "") else data[name] for name, f in EVAL_FIELDS.items()
        }
        data["evaluation"]["eval_solved_by"] = (data["evaluation"]["eval_solved_by"] or "").strip()
        if data.get("token_sample_groups") is None:
            data["token_sample_groups"] = TOKEN_FIELDS["token_sample_groups"].default
        if self.is_sft and data["evaluation"]["eval_steps"] and not chosen:
            self.add_error(
                "eval_steps", "Pick the reward functions that score the evaluations, or set eval_steps to 0."
            )
        if data["evaluation"]["eval_steps"] and data.get("dataset_version") and not data["dataset_version"].eval_rows:
            self.add_error(
                "eval_steps",
                f"{data['dataset_version']} has no eval split: map one on the dataset's "
                f"mapping page, or set eval_steps to 0.",
            )
        data["engine"] = data.get("engine") or "local"  # blank (a form without the Engine box): a local run
        data["num_workers"] = data.get("num_workers") or 1
        if data["engine"] == "local" and data["num_workers"] > 1:
            self.add_error("num_workers", "Only a Ray run has several workers: pick the Ray engine, or 1.")
        g = data["config"]
        given = (data.get("config_extra") or {}).get("generation_batch_size")  # TRL's, where set, is the batch
        if g.get("num_generations") and g.get("per_device_train_batch_size"):
            steps = g.get("steps_per_generation") or g.get("gradient_accumulation_steps") or 1
            if isinstance(given, int) and not isinstance(given, bool) and not g.get("steps_per_generation"):
                if given % g["num_generations"]:
                    self.add_error(
                        "trl_generation_batch_size" if "trl_generation_batch_size" in self.fields else "config_extra",
                        f"generation_batch_size ({given}) must be a multiple of num_generations "
                        f"({g['num_generations']}).",
                    )
            elif (g["per_device_train_batch_size"] * steps) % g["num_generations"]:
                self.add_error(
                    "per_device_train_batch_size",
                    f"The generation batch (this x {steps} steps per generation) must be a multiple of "
                    f"num_generations ({g['num_generations']}).",
                )
        return data
