"""The run page's form for a standalone evaluation of one of the run's models."""

from __future__ import annotations

from dataclasses import replace

from django import forms
from grpo_web_protocol.config import EVAL_FIELDS

from runs.evaluations.services import EVAL_SPLITS, eval_max_new_tokens, eval_settings, model_choices
from runs.forms import config_field
from runs.models import DatasetVersion, Evaluation


class EvaluationForm(forms.Form):
    """A standalone evaluation of one of ``run``'s models (runs.evaluations.services.evaluation_create). The settings start at
    the run's own evaluation settings, so a standalone result compares with the periodic ones."""

    SETTINGS = {
        "eval_num_samples": "k",
        "eval_max_prompts": "max prompts",
        "eval_temperature": "temperature",
        "eval_max_new_tokens": "max new tokens",
        "eval_solved_by": "solved by",
        "eval_threshold": "threshold",
    }

    model = forms.ChoiceField(label="model")
    model_path = forms.CharField(
        max_length=500,
        required=False,
        label="model path",
        help_text="With 'another model': a hub id, or the folder of a model you may load (a run's output "
        "or export of yours or shared with you, or one under GRPO_MODEL_ROOTS).",
    )
    dataset_version = forms.ModelChoiceField(queryset=DatasetVersion.objects.none(), label="dataset")
    split = forms.ChoiceField(choices=list(EVAL_SPLITS.items()), label="split")
    generator = forms.ChoiceField(
        choices=Evaluation.Generator.choices,
        initial=Evaluation.Generator.TRANSFORMERS,
        required=False,  # left out (an older form, a script): transformers, as before the choice existed
        label="sample with",
        help_text="vLLM is faster where it runs; its samples differ from transformers' for the same seed.",
    )

    def __init__(self, *args, run, **kwargs):
        super().__init__(*args, **kwargs)
        self.run, self.settings = run, eval_settings(run)
        self.fields["model"].choices = model_choices(run)
        versions = self.fields["dataset_version"]
        versions.queryset = (
            DatasetVersion.objects.filter(dataset__owner=run.owner).select_related("dataset").order_by("-created_at")
        )
        versions.label_from_instance = lambda v: f"{v} ({v.eval_rows} eval rows, {v.row_count} in all)"
        for name, label in self.SETTINGS.items():
            f = EVAL_FIELDS[name]
            if name == "eval_solved_by":
                self.fields[name] = forms.ChoiceField(
                    required=False,
                    help_text=f.metadata["help"],
                    choices=[
                        ("", "default"),
                        *[(n, n) for n in run.reward_names],
                        ("reward", "reward (weighted total)"),
                    ],
                )
            else:
                self.fields[name] = config_field(name, f)
            self.fields[name].label = label
        self.fields["eval_max_new_tokens"].required = False  # left out (an older client): the run's length
        self.initial = {
            "model": "base",
            "dataset_version": run.dataset_version_id,
            "split": "eval" if run.dataset_version_id and run.dataset_version.eval_rows else "all",
            **{name: getattr(self.settings, name) for name in self.SETTINGS},
            # shown as what it will be: the run's generation length unless changed here
            "eval_max_new_tokens": eval_max_new_tokens(run, {"eval_max_new_tokens": self.settings.eval_max_new_tokens}),
            **self.initial,
        }

    def evaluation_args(self) -> dict:
        """evaluation_create's arguments."""
        d = self.cleaned_data
        values = {name: d[name] for name in self.SETTINGS}
        values["eval_max_new_tokens"] = values["eval_max_new_tokens"] or 0  # blank: the run's max_completion_length
        return {
            "model": d["model"],
            "model_path": d["model_path"],
            "dataset_version": d["dataset_version"],
            "split": d["split"],
            "settings": replace(self.settings, **values),
            "generator": d["generator"] or Evaluation.Generator.TRANSFORMERS,
        }
