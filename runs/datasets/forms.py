"""Forms of the datasets capability: upload a file, import from Hugging Face, map and split a version."""

from __future__ import annotations

from django import forms

from runs.datasets.importing.hf import hub_id_problem
from runs.datasets.mapping import Mapping, template_fields
from runs.datasets.services import import_choices
from runs.models import DatasetVersion


class _DatasetSourceForm(forms.Form):
    name = forms.CharField(max_length=200)
    prompt_column = forms.CharField(
        max_length=200,
        required=False,
        initial="prompt",
        help_text="The column holding the prompt: text, or a list of {role, content} "
        "messages. You can pick another one later, in the mapping.",
    )
    gsm8k_column = forms.CharField(
        max_length=200,
        required=False,
        label="Parse '#### answer' from column",
        help_text="GSM8K-style solutions ending in '#### 42': the number goes to 'answer', "
        "the full solution to 'solution'. Blank: off.",
    )

    def __init__(self, *args, dataset=None, **kwargs):
        super().__init__(*args, **kwargs)
        if dataset is not None:  # a new version of an existing dataset keeps its name
            del self.fields["name"]

    def clean_prompt_column(self):
        return self.cleaned_data["prompt_column"].strip() or "prompt"


class DatasetUploadForm(_DatasetSourceForm):
    file = forms.FileField(
        help_text="JSON lines, a JSON array, CSV or Parquet; optionally gzipped (.gz) or alone in "
        "a .zip. One row per example with a prompt and the columns your rewards read "
        "(for example 'answer'). CSV cells are kept as text, formulas are never run."
    )
    field_order = ["name", "file", "prompt_column", "gsm8k_column"]


class DatasetHubForm(_DatasetSourceForm):
    local_path = forms.ChoiceField(
        required=False,
        label="Local path",
        help_text="A folder saved with save_to_disk, a data folder or a data file, under "
        "the server's import folders (GRPO_IMPORT_ROOTS).",
    )
    hub_id = forms.CharField(max_length=200, required=False, label="Hub id", help_text="For example openai/gsm8k.")
    config = forms.CharField(max_length=200, required=False, help_text="For example 'main'.")
    split = forms.CharField(max_length=200, required=False, initial="train")
    field_order = ["name", "local_path", "hub_id", "config", "split", "prompt_column", "gsm8k_column"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["local_path"].choices = [("", "(none: a hub id below)")] + import_choices()

    def clean(self):
        data = super().clean()
        if bool(data.get("local_path")) == bool(data.get("hub_id")):
            raise forms.ValidationError("Give either a local path or a hub id.")
        problem = hub_id_problem(data["hub_id"]) if data.get("hub_id") else None
        if problem:
            self.add_error("hub_id", problem[0].upper() + problem[1:] + ".")
        return data


class DatasetMappingForm(forms.Form):
    prompt_column = forms.ChoiceField(help_text="Used when the template is blank.")
    prompt_format = forms.ChoiceField(
        choices=DatasetVersion.PromptFormat.choices,
        help_text="TRL's two prompt shapes; conversational prompts go through the model's chat template.",
    )
    system_prompt = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Conversational: a system message first. Standard: a paragraph before the prompt.",
    )
    prompt_template = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Text with {column} fields, for example 'Solve: {question}'. {{ and }} "
        "are literal braces. Blank: the prompt column as it is.",
    )
    reward_columns = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="Passed to reward functions under their names."
    )
    split = forms.ChoiceField(choices=DatasetVersion.Split.choices)
    eval_fraction = forms.FloatField(required=False, min_value=0.0, max_value=0.99, initial=0.1)
    split_seed = forms.IntegerField(required=False, initial=0)
    split_column = forms.ChoiceField(required=False)
    model = forms.CharField(
        max_length=500,
        required=False,
        help_text="For the preview only: 'tiny', a model folder you may load, or a hub id already in "
        "this machine's cache. Blank: no chat template.",
    )

    def __init__(self, *args, version: DatasetVersion, **kwargs):
        super().__init__(*args, **kwargs)
        columns = [(c, f"{c} ({version.column_types.get(c, '?')})") for c in version.columns]
        self.fields["prompt_column"].choices = columns
        self.fields["reward_columns"].choices = columns
        self.fields["split_column"].choices = [("", "—")] + columns

    @staticmethod
    def initial_for(version: DatasetVersion) -> dict:
        return {**Mapping.of(version).as_fields(), "eval_fraction": version.eval_fraction or 0.1}

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
        return Mapping(
            prompt_column=d["prompt_column"],
            prompt_format=d["prompt_format"],
            system_prompt=d["system_prompt"],
            prompt_template=d["prompt_template"],
            reward_columns=tuple(d["reward_columns"]),
            split=split,
            eval_fraction=(d.get("eval_fraction") or 0.0) if split == "fraction" else 0.0,
            split_seed=(d.get("split_seed") or 0) if split == "fraction" else 0,
            split_column=d.get("split_column", "") if split == "column" else "",
        )
