from django import forms

from rewards.library import NAMES, OPEN_R1

TEMPLATE_CHOICES = [("", "blank")] + [(n, n) for n in NAMES] + [(n, f"{n} (open-r1)") for n in OPEN_R1]
BLANK = '''def my_reward(completions, prompts=None, completion_ids=None, **kwargs):
    """One score per completion: a float, or None to abstain. Dataset columns arrive as keyword arguments."""
    return [float(len(c) > 0) for c in completions]
'''


class RewardNewForm(forms.Form):
    name = forms.SlugField(max_length=64, help_text="Letters, digits, - and _. TRL logs it as rewards/<name>/mean.")
    template = forms.ChoiceField(choices=TEMPLATE_CHOICES, required=False,
                                 help_text="Start from a library function, or from a blank one.")


class RewardEditForm(forms.Form):
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    entrypoint = forms.CharField(max_length=100, help_text="The function TRL calls.")
    source = forms.CharField(widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false"}), strip=False)


class RewardTestForm(forms.Form):
    source = forms.CharField(strip=False)
    entrypoint = forms.CharField(max_length=100)
    dataset_version = forms.IntegerField()
    rows = forms.IntegerField(min_value=1, max_value=50, initial=5)
    completions = forms.CharField(required=False, strip=False,
                                  help_text="Completions to score, separated by a line holding only ---; "
                                            "row i gets completion i (cycling).")
    run = forms.IntegerField(required=False, help_text="Or score a run's stored rollouts of its latest step.")

    def clean(self):
        data = super().clean()
        if not data.get("run") and not (data.get("completions") or "").strip():
            raise forms.ValidationError("Type at least one completion, or pick a run's rollouts.")
        return data

    def completion_list(self) -> list[str]:
        text = self.cleaned_data.get("completions") or ""
        parts, current = [], []
        for line in text.splitlines():
            if line.strip() == "---":
                parts.append("\n".join(current))
                current = []
            else:
                current.append(line)
        parts.append("\n".join(current))
        return [p for p in parts if p.strip()]
