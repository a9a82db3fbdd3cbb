from django import forms

from rewards.library import ENVIRONMENTS, NAMES, OPEN_R1, OUMI, TOOLS
from rewards.models import RewardFunction

TEMPLATE_CHOICES = (
    [("", "blank")]
    + [(n, n) for n in NAMES]
    + [(n, f"{n} (open-r1)") for n in OPEN_R1]
    + [(n, f"{n} (Oumi)") for n in OUMI]
    + [(n, f"{n} (tool)") for n in TOOLS]
    + [(n, f"{n} (environment)") for n in ENVIRONMENTS]
)
BLANK_ENVIRONMENT = '''class MyEnvironment:
    """One instance per rollout (TRL's environment_factory). Its public methods are the model's tools (typed,
    documented parameters, as a tool's); reset(**row) starts a rollout; get_reward() (optional) scores it."""

    def __init__(self):
        self.notes = []

    def reset(self, **row):
        """Called with the dataset row's columns before each rollout. Return None, or text appended to the last
        user message."""
        self.notes = []
        return None

    def note(self, text: str) -> str:
        """Write a note down.

        Args:
            text: What to note.
        """
        self.notes.append(text)
        return f"{len(self.notes)} notes"

    def get_reward(self) -> float:
        return float(len(self.notes) > 0)
'''
BLANK_TOOL = '''def my_tool(text: str) -> str:
    """What the tool does: the model reads this docstring, and each parameter's line, to decide when to call it.

    Args:
        text: What the model should pass.
    """
    return text
'''
BLANK = '''def my_reward(completions, prompts=None, completion_ids=None, **kwargs):
    """One score per completion: a float, or None to abstain. Dataset columns arrive as keyword arguments."""
    return [float(len(c) > 0) for c in completions]
'''


class RewardNewForm(forms.Form):
    name = forms.SlugField(max_length=64, help_text="Letters, digits, - and _. TRL logs it as rewards/<name>/mean.")
    template = forms.ChoiceField(
        choices=TEMPLATE_CHOICES, required=False, help_text="Start from a library function, or from a blank one."
    )
    kind = forms.ChoiceField(
        choices=RewardFunction.Kind.choices,
        initial=RewardFunction.Kind.REWARD,
        required=False,
        help_text="A tool is a function the model calls while it generates (TRL's tools); an "
        "environment is a class whose methods are tools, one instance per rollout "
        "(TRL's environment_factory); a library tool or environment template makes "
        "one whatever is picked here.",
    )

    def clean(self):
        data = super().clean()
        if data.get("template") in TOOLS:
            data["kind"] = RewardFunction.Kind.TOOL
        if data.get("template") in ENVIRONMENTS:
            data["kind"] = RewardFunction.Kind.ENVIRONMENT
        data["kind"] = data.get("kind") or RewardFunction.Kind.REWARD
        return data


class RewardEditForm(forms.Form):
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    entrypoint = forms.CharField(max_length=100, help_text="The function TRL calls.")
    source = forms.CharField(widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false"}), strip=False)


class RewardTestForm(forms.Form):
    source = forms.CharField(strip=False)
    entrypoint = forms.CharField(max_length=100)
    dataset_version = forms.IntegerField(min_value=1, max_value=(1 << 63) - 1)
    rows = forms.IntegerField(min_value=1, max_value=50, initial=5)
    completions = forms.CharField(
        required=False,
        strip=False,
        help_text="Completions to score, separated by a line holding only ---; row i gets completion i (cycling).",
    )
    run = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=(1 << 63) - 1,
        help_text="Or score a run's stored rollouts of its latest step.",
    )

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
