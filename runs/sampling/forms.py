"""The rejection-sampling job form: a model, the prompts (a dataset version and split), the reward functions that
score the samples (each at its latest version), what passes and how much is kept, and rows to mix in."""

from dataclasses import fields

from django import forms

from rewards.models import RewardFunction
from runs.access import visible_versions
from runs.forms import PkMultipleChoiceField
from runs.models import DatasetVersion
from runs.sampling.services import SPLITS, RejectionSettings

HELP = {
    "k": "Completions sampled per prompt.",
    "threshold": "A sample passes when the deciding reward is at least this.",
    "solved_by": "The deciding reward: a chosen function's name, or 'reward' for the weighted total. Blank: "
    "'accuracy' if chosen, else the total.",
    "max_per_prompt": "m: passing samples kept per prompt at most (best reward first, the same text once).",
    "temperature": "Sampling temperature.",
    "max_new_tokens": "Tokens generated per sample at most.",
    "max_prompts": "Use the first N prompts of the split; 0: all.",
    "mix_rows": "Rows of the mix-in dataset (with a completion column) added to the output.",
    "seed": "Random seed of the sampling.",
}


class RejectionJobForm(forms.Form):
    name = forms.CharField(max_length=200, initial="rejection-sampled SFT set")
    model = forms.CharField(
        max_length=500,
        initial="tiny-sft",
        help_text="'tiny', 'tiny-sft', a hub id, or a model folder you may load (a run's final output or "
        "checkpoint of yours or shared with you, or one under GRPO_MODEL_ROOTS).",
    )
    dataset_version = forms.ModelChoiceField(queryset=DatasetVersion.objects.none(), label="Prompts")
    split = forms.ChoiceField(choices=[(s, s) for s in SPLITS], initial="all")
    rewards = PkMultipleChoiceField(queryset=RewardFunction.objects.none(), widget=forms.CheckboxSelectMultiple)
    mix_version = forms.ModelChoiceField(queryset=DatasetVersion.objects.none(), required=False, label="Mix in rows of")

    def __init__(self, *args, owner, **kwargs):
        super().__init__(*args, **kwargs)
        versions = visible_versions(owner).select_related("dataset").order_by("-created_at")
        self.fields["dataset_version"].queryset = versions
        self.fields["mix_version"].queryset = versions
        self.fields["rewards"].queryset = (
            RewardFunction.objects.visible_to(owner).filter(versions__isnull=False).distinct().order_by("name")
        )
        for f in fields(RejectionSettings):
            kind = {int: forms.IntegerField, float: forms.FloatField}.get(type(f.default), forms.CharField)
            self.fields[f.name] = kind(initial=f.default, help_text=HELP[f.name], required=kind is not forms.CharField)

    def settings_fields(self):
        return [self[f.name] for f in fields(RejectionSettings)]

    def clean(self):
        data = super().clean()
        data["rewards_pinned"] = [
            {"name": rf.name, "weight": 1.0, "version_id": rf.latest_version.pk, "version": rf.latest_version.number}
            for rf in data.get("rewards") or []
        ]
        names = [r["name"] for r in data["rewards_pinned"]]
        if len(set(names)) != len(names):
            self.add_error("rewards", "Two chosen reward functions share a name: pick one.")
        try:
            data["settings"] = RejectionSettings(
                **{
                    f.name: data[f.name] if data.get(f.name) is not None else f.default
                    for f in fields(RejectionSettings)
                }
            )
        except KeyError:
            pass
        return data
