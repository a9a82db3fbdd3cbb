import re
from dataclasses import replace

from django import forms

from rewards.models import RewardFunction
from runs.dataset_mapping import Mapping, template_fields
from runs.evaluations import EVAL_SPLITS, eval_settings, model_choices
from runs.models import DatasetVersion
from workers.config import EVAL_FIELDS, GRPO_FIELDS, GROUPS


class _DatasetSourceForm(forms.Form):
    name = forms.CharField(max_length=200)
    prompt_column = forms.CharField(max_length=200, required=False, initial="prompt",
                                    help_text="The column holding the prompt: text, or a list of {role, content} "
                                              "messages. You can pick another one later, in the mapping.")
    gsm8k_column = forms.CharField(max_length=200, required=False, label="Parse '#### answer' from column",
                                   help_text="GSM8K-style solutions ending in '#### 42': the number goes to 'answer', "
                                             "the full solution to 'solution'. Blank: off.")

    def __init__(self, *args, dataset=None, **kwargs):
        super().__init__(*args, **kwargs)
        if dataset is not None:  # a new version of an existing dataset keeps its name
            del self.fields["name"]

    def clean_prompt_column(self):
        return self.cleaned_data["prompt_column"].strip() or "prompt"


class DatasetUploadForm(_DatasetSourceForm):
    file = forms.FileField(help_text="JSON lines, a JSON array, CSV or Parquet; optionally gzipped (.gz) or alone in "
                                     "a .zip. One row per example with a prompt and the columns your rewards read "
                                     "(for example 'answer'). CSV cells are kept as text, formulas are never run.")
    field_order = ["name", "file", "prompt_column", "gsm8k_column"]


class DatasetHubForm(_DatasetSourceForm):
    local_path = forms.CharField(max_length=500, required=False, label="Local path",
                                 help_text="A folder saved with save_to_disk, a data folder or a data file, under the "
                                           "server's imports folder.")
    hub_id = forms.CharField(max_length=200, required=False, label="Hub id", help_text="For example openai/gsm8k.")
    config = forms.CharField(max_length=200, required=False, help_text="For example 'main'.")
    split = forms.CharField(max_length=200, required=False, initial="train")
    field_order = ["name", "local_path", "hub_id", "config", "split", "prompt_column", "gsm8k_column"]

    def clean(self):
        data = super().clean()
        if bool(data.get("local_path")) == bool(data.get("hub_id")):
            raise forms.ValidationError("Give either a local path or a hub id.")
        if data.get("hub_id") and not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", data["hub_id"]):
            self.add_error("hub_id", "A hub id looks like 'name' or 'owner/name'.")
        return data


class DatasetMappingForm(forms.Form):
    prompt_column = forms.ChoiceField(help_text="Used when the template is blank.")
    prompt_format = forms.ChoiceField(choices=DatasetVersion.PromptFormat.choices,
                                      help_text="TRL's two prompt shapes; conversational prompts go through the "
                                                "model's chat template.")
    system_prompt = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                    help_text="Conversational: a system message first. Standard: a paragraph before "
                                              "the prompt.")
    prompt_template = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                      help_text="Text with {column} fields, for example 'Solve: {question}'. {{ and }} "
                                                "are literal braces. Blank: the prompt column as it is.")
    reward_columns = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                               help_text="Passed to reward functions under their names.")
    split = forms.ChoiceField(choices=DatasetVersion.Split.choices)
    eval_fraction = forms.FloatField(required=False, min_value=0.0, max_value=0.99, initial=0.1)
    split_seed = forms.IntegerField(required=False, initial=0)
    split_column = forms.ChoiceField(required=False)
    model = forms.CharField(max_length=500, required=False,
                            help_text="For the preview only: 'tiny', a local model folder, or a hub id already in "
                                      "this machine's cache. Blank: no chat template.")

    def __init__(self, *args, version: DatasetVersion, **kwargs):
        super().__init__(*args, **kwargs)
        columns = [(c, f"{c} ({version.column_types.get(c, '?')})") for c in version.columns]
        self.fields["prompt_column"].choices = columns
        self.fields["reward_columns"].choices = columns
        self.fields["split_column"].choices = [("", "—")] + columns

    @staticmethod
    def initial_for(version: DatasetVersion) -> dict:
        return {**version.mapping.as_fields(), "eval_fraction": version.eval_fraction or 0.1}

    def clean_prompt_template(self):
        template = self.cleaned_data["prompt_template"]
        try:
            template_fields(template)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return template

    def clean(self):
        data = super().clean()
        if data.get("split") == "fraction" and not data.get("eval_fraction"):
            self.add_error("eval_fraction", "Give the fraction of rows held out for evaluation.")
        if data.get("split") == "column" and not data.get("split_column"):
            self.add_error("split_column", "Choose the column that says which rows train.")
        return data

    def mapping(self) -> Mapping:
        d = self.cleaned_data
        split = d["split"]
        return Mapping(prompt_column=d["prompt_column"], prompt_format=d["prompt_format"],
                       system_prompt=d["system_prompt"], prompt_template=d["prompt_template"],
                       reward_columns=tuple(d["reward_columns"]), split=split,
                       eval_fraction=(d.get("eval_fraction") or 0.0) if split == "fraction" else 0.0,
                       split_seed=(d.get("split_seed") or 0) if split == "fraction" else 0,
                       split_column=d.get("split_column", "") if split == "column" else "")


def _grpo_field(name, f):
    default, help_text = f.default, f.metadata["help"]
    optional = default is None
    common = {"initial": default, "help_text": help_text, "required": not optional}
    if "choices" in f.metadata:
        return forms.ChoiceField(choices=[(c, c) for c in f.metadata["choices"]], **common)
    if isinstance(default, bool):
        return forms.BooleanField(**{**common, "required": False})
    if isinstance(default, str):
        return forms.CharField(max_length=200, **{**common, "required": False})
    if isinstance(default, int) or f.type.startswith("int"):
        return forms.IntegerField(min_value=f.metadata.get("min"), **common)
    return forms.FloatField(min_value=f.metadata.get("min"), **common)


class RunForm(forms.Form):
    """A run: model, dataset version, pinned reward versions with weights, and GRPOConfig grouped as TRL documents it.

    ``run`` pre-fills everything from an existing run (clone with edits)."""

    name = forms.CharField(max_length=200)
    model = forms.CharField(max_length=500, initial="tiny",
                            help_text="'tiny' for the local demo model ('tiny-sft': the same after a short cold-start "
                                      "SFT, it answers now and then), a local path, or a Hugging Face hub id.")
    dataset_version = forms.ModelChoiceField(queryset=DatasetVersion.objects.none())
    requested_gpus = forms.IntegerField(min_value=0, max_value=64, initial=0, label="GPUs",
                                        help_text="0 runs on a CPU worker; N waits for a worker with N GPUs.")
    config_extra = forms.JSONField(required=False, initial=dict, widget=forms.HiddenInput,
                                   help_text="Further GRPOConfig fields from an imported TRL config.")

    def __init__(self, *args, owner, run=None, imported=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset_version"].queryset = (
            DatasetVersion.objects.filter(dataset__owner=owner).select_related("dataset").order_by("-created_at")
        )
        if not self.initial.get("dataset_version"):
            latest = self.fields["dataset_version"].queryset.first()
            self.initial["dataset_version"] = latest.pk if latest else None
        self.reward_functions = [rf for rf in RewardFunction.objects.filter(owner=owner).prefetch_related("versions")
                                 if rf.versions.all()]
        for rf in self.reward_functions:
            numbers = sorted((v.number for v in rf.versions.all()), reverse=True)
            self.fields[f"reward_{rf.pk}"] = forms.BooleanField(required=False, label=rf.name)
            self.fields[f"weight_{rf.pk}"] = forms.FloatField(initial=1.0, label=f"{rf.name} weight")
            self.fields[f"version_{rf.pk}"] = forms.TypedChoiceField(
                choices=[(n, f"v{n}") for n in numbers], coerce=int, initial=numbers[0], label=f"{rf.name} version")
        for name, f in GRPO_FIELDS.items():
            self.fields[name] = _grpo_field(name, f)
        for name, f in EVAL_FIELDS.items():  # optional: blank keeps the default
            self.fields[name] = _grpo_field(name, f)
            self.fields[name].required = False
        source = run or imported
        if source is not None:
            self._prefill(source, clone=run is not None)

    def _prefill(self, source, clone: bool):
        by_name = {rf.name: rf for rf in self.reward_functions}
        extra = getattr(source, "config_extra", None) or getattr(source, "extra", None) or {}
        self.initial.update({"model": source.model, "requested_gpus": source.requested_gpus, **source.config,
                             **(source.evaluation or {}), "config_extra": extra})
        self.initial["name"] = f"{source.name} (clone)" if clone else source.name
        if source.dataset_version is not None:
            self.initial["dataset_version"] = source.dataset_version.pk
        for r in source.rewards:
            rf = by_name.get(r["name"])
            if rf:
                self.initial.update({f"reward_{rf.pk}": True, f"weight_{rf.pk}": r["weight"],
                                     f"version_{rf.pk}": r.get("version") or self.fields[f"version_{rf.pk}"].initial})

    def reward_rows(self):
        """(checkbox, weight, version, reward function) for the template."""
        return [(self[f"reward_{rf.pk}"], self[f"weight_{rf.pk}"], self[f"version_{rf.pk}"], rf)
                for rf in self.reward_functions]

    def grpo_groups(self):
        """[(group, [bound fields])] in TRL's documented order."""
        return [(group, [self[name] for name, f in GRPO_FIELDS.items() if f.metadata["group"] == group])
                for group in GROUPS]

    def eval_fields(self):
        return [self[name] for name in EVAL_FIELDS]

    def clean(self):
        data = super().clean()
        chosen = [rf for rf in self.reward_functions if data.get(f"reward_{rf.pk}")]
        if not chosen:
            raise forms.ValidationError("Pick at least one reward function.")
        data["rewards"] = []
        for rf in chosen:
            version = next(v for v in rf.versions.all() if v.number == data.get(f"version_{rf.pk}"))
            data["rewards"].append({"name": rf.name, "weight": data[f"weight_{rf.pk}"], "version_id": version.pk,
                                    "version": version.number})
        data["config"] = {name: data.get(name) for name in GRPO_FIELDS}
        data["evaluation"] = {name: f.default if data.get(name) in (None, "") else data[name]
                              for name, f in EVAL_FIELDS.items()}
        data["evaluation"]["eval_solved_by"] = (data["evaluation"]["eval_solved_by"] or "").strip()
        if data["evaluation"]["eval_steps"] and data.get("dataset_version") and not data["dataset_version"].eval_rows:
            self.add_error("eval_steps", f"{data['dataset_version']} has no eval split: map one on the dataset's "
                                         f"mapping page, or set eval_steps to 0.")
        g = data["config"]
        if g.get("num_generations") and g.get("per_device_train_batch_size"):
            steps = g.get("steps_per_generation") or g.get("gradient_accumulation_steps") or 1
            if (g["per_device_train_batch_size"] * steps) % g["num_generations"]:
                self.add_error("per_device_train_batch_size",
                               f"The generation batch (this x {steps} steps per generation) must be a multiple of "
                               f"num_generations ({g['num_generations']}).")
        return data


class EvaluationForm(forms.Form):
    """A standalone evaluation of one of ``run``'s models (runs.evaluations.evaluation_create). The settings start at
    the run's own evaluation settings, so a standalone result compares with the periodic ones."""

    SETTINGS = {"eval_num_samples": "k", "eval_max_prompts": "max prompts", "eval_temperature": "temperature",
                "eval_solved_by": "solved by", "eval_threshold": "threshold"}

    model = forms.ChoiceField(label="model")
    model_path = forms.CharField(max_length=500, required=False, label="model path",
                                 help_text="With 'another model': a model folder on the worker, or a hub id.")
    dataset_version = forms.ModelChoiceField(queryset=DatasetVersion.objects.none(), label="dataset")
    split = forms.ChoiceField(choices=list(EVAL_SPLITS.items()), label="split")

    def __init__(self, *args, run, **kwargs):
        super().__init__(*args, **kwargs)
        self.run, self.settings = run, eval_settings(run)
        self.fields["model"].choices = model_choices(run)
        versions = self.fields["dataset_version"]
        versions.queryset = (DatasetVersion.objects.filter(dataset__owner=run.owner).select_related("dataset")
                             .order_by("-created_at"))
        versions.label_from_instance = lambda v: f"{v} ({v.eval_rows} eval rows, {v.row_count} in all)"
        for name, label in self.SETTINGS.items():
            f = EVAL_FIELDS[name]
            if name == "eval_solved_by":
                self.fields[name] = forms.ChoiceField(required=False, help_text=f.metadata["help"], choices=[
                    ("", "default"), *[(n, n) for n in run.reward_names], ("reward", "reward (weighted total)")])
            else:
                self.fields[name] = _grpo_field(name, f)
            self.fields[name].label = label
        self.initial = {"model": "base", "dataset_version": run.dataset_version_id,
                        "split": "eval" if run.dataset_version.eval_rows else "all",
                        **{name: getattr(self.settings, name) for name in self.SETTINGS}, **self.initial}

    def evaluation_args(self) -> dict:
        """evaluation_create's arguments."""
        d = self.cleaned_data
        return {"model": d["model"], "model_path": d["model_path"], "dataset_version": d["dataset_version"],
                "split": d["split"], "settings": replace(self.settings, **{name: d[name] for name in self.SETTINGS})}
