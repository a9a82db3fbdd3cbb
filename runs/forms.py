from django import forms

from rewards.models import RewardFunction
from runs.models import DatasetVersion
from workers.config import GRPO_FIELDS


class DatasetUploadForm(forms.Form):
    name = forms.CharField(max_length=200)
    file = forms.FileField(help_text="JSON lines: one object per line with a non-empty 'prompt' and the columns your "
                                     "rewards read (for example 'answer').")


def _grpo_field(name, f):
    default, help_text = f.default, f.metadata["help"]
    if "choices" in f.metadata:
        return forms.ChoiceField(choices=[(c, c) for c in f.metadata["choices"]], initial=default, help_text=help_text)
    if isinstance(default, bool):
        return forms.BooleanField(initial=default, required=False, help_text=help_text)
    if isinstance(default, int):
        return forms.IntegerField(initial=default, min_value=f.metadata.get("min"), help_text=help_text)
    return forms.FloatField(initial=default, min_value=f.metadata.get("min"), help_text=help_text)


class RunForm(forms.Form):
    name = forms.CharField(max_length=200)
    model = forms.CharField(max_length=500, initial="tiny",
                            help_text="'tiny' for the local demo model, a local path, or a Hugging Face hub id.")
    dataset_version = forms.ModelChoiceField(queryset=DatasetVersion.objects.none())

    def __init__(self, *args, owner, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["dataset_version"].queryset = (
            DatasetVersion.objects.filter(dataset__owner=owner).select_related("dataset").order_by("-created_at")
        )
        if not self.initial.get("dataset_version"):
            latest = self.fields["dataset_version"].queryset.first()
            self.initial["dataset_version"] = latest.pk if latest else None
        self.reward_functions = list(RewardFunction.objects.filter(owner=owner))
        for rf in self.reward_functions:
            self.fields[f"reward_{rf.pk}"] = forms.BooleanField(required=False, initial=True, label=rf.name)
            self.fields[f"weight_{rf.pk}"] = forms.FloatField(initial=1.0, label=f"{rf.name} weight")
        for name, f in GRPO_FIELDS.items():
            self.fields[name] = _grpo_field(name, f)

    def reward_rows(self):
        """(checkbox, weight, reward function) for the template."""
        return [(self[f"reward_{rf.pk}"], self[f"weight_{rf.pk}"], rf) for rf in self.reward_functions]

    def grpo_fields(self):
        return [self[name] for name in GRPO_FIELDS]

    def clean(self):
        data = super().clean()
        chosen = [rf for rf in self.reward_functions if data.get(f"reward_{rf.pk}")]
        if not chosen:
            raise forms.ValidationError("Pick at least one reward function.")
        data["rewards"] = [{"name": rf.name, "builtin": rf.builtin, "weight": data[f"weight_{rf.pk}"]} for rf in chosen]
        data["config"] = {name: data[name] for name in GRPO_FIELDS}
        g = data["config"]
        if g.get("num_generations") and g.get("per_device_train_batch_size"):
            if g["per_device_train_batch_size"] % g["num_generations"]:
                self.add_error("per_device_train_batch_size",
                               f"Must be a multiple of num_generations ({g['num_generations']}).")
        return data
