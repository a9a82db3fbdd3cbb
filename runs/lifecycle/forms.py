"""The run form: model, dataset version, pinned reward versions with weights, GRPOConfig (an SFT run: SFTConfig) and
evaluation settings."""

from django import forms

from rewards.models import RewardFunction
from runs.access import visible_versions
from runs.forms import JSONObjectField, config_field
from runs.models import DatasetVersion
from runs.protocol.config import EVAL_FIELDS, kind_fields, kind_groups


class RunForm(forms.Form):
    """A run: model, dataset version, pinned reward versions with weights, and GRPOConfig grouped as TRL documents it.

    ``kind`` "sft": SFTConfig's fields instead of GRPOConfig's, and the reward functions are optional (they score
    the evaluations only). ``run`` pre-fills everything from an existing run (clone with edits)."""

    name = forms.CharField(max_length=200)
    model = forms.CharField(max_length=500, initial="tiny",
                            help_text="'tiny' for the local demo model ('tiny-sft': the same after a short cold-start "
                                      "SFT, it answers now and then), a local path, or a Hugging Face hub id.")
    dataset_version = forms.ModelChoiceField(queryset=DatasetVersion.objects.none())
    requested_gpus = forms.IntegerField(min_value=0, max_value=64, initial=0, label="GPUs",
                                        help_text="0 runs on a CPU worker; N waits for a worker with N GPUs.")
    queue_anyway = forms.BooleanField(required=False, label="Queue anyway",
                                      help_text="Queue even though no online worker has these GPUs or vLLM yet.")
    config_extra = JSONObjectField(required=False, initial=dict, widget=forms.HiddenInput,
                                   help_text="Further GRPOConfig fields from an imported TRL config.")

    def __init__(self, *args, owner, run=None, imported=None, kind="grpo", **kwargs):
        super().__init__(*args, **kwargs)
        self.kind = run.kind if run is not None else kind
        self.config_fields = kind_fields(self.kind)
        self.fields["dataset_version"].queryset = (
            visible_versions(owner).select_related("dataset").order_by("-created_at")
        )
        if not self.initial.get("dataset_version"):
            latest = self.fields["dataset_version"].queryset.first()
            self.initial["dataset_version"] = latest.pk if latest else None
        # the user's own functions first, then those teams share with them (a shared one may carry the same name)
        self.reward_functions = sorted(
            (rf for rf in RewardFunction.objects.visible_to(owner).select_related("owner").prefetch_related("versions")
             if rf.versions.all()), key=lambda rf: (rf.owner_id != owner.pk, rf.name, rf.pk))
        for rf in self.reward_functions:
            numbers = sorted((v.number for v in rf.versions.all()), reverse=True)
            self.fields[f"reward_{rf.pk}"] = forms.BooleanField(required=False, label=rf.name)
            self.fields[f"weight_{rf.pk}"] = forms.FloatField(initial=1.0, label=f"{rf.name} weight")
            self.fields[f"version_{rf.pk}"] = forms.TypedChoiceField(
                choices=[(n, f"v{n}") for n in numbers], coerce=int, initial=numbers[0], label=f"{rf.name} version")
        for name, f in self.config_fields.items():
            self.fields[name] = config_field(name, f)
        for name, f in EVAL_FIELDS.items():  # optional: blank keeps the default
            self.fields[name] = config_field(name, f)
            self.fields[name].required = False
        source = run or imported
        if source is not None:
            self._prefill(source, clone=run is not None)

    def _prefill(self, source, clone: bool):
        by_name = {rf.name: rf for rf in reversed(self.reward_functions)}  # the user's own wins a shared name
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

    @property
    def is_sft(self) -> bool:
        return self.kind == "sft"

    def grpo_groups(self):
        """[(group, [bound fields])] of the kind's config (GRPOConfig or SFTConfig) in TRL's documented order."""
        return [(group, [self[name] for name, f in self.config_fields.items() if f.metadata["group"] == group])
                for group in kind_groups(self.kind)]

    def eval_fields(self):
        return [self[name] for name in EVAL_FIELDS]

    def clean(self):
        data = super().clean()
        chosen = [rf for rf in self.reward_functions if data.get(f"reward_{rf.pk}")]
        if not chosen and not self.is_sft:
            raise forms.ValidationError("Pick at least one reward function.")
        names = [rf.name for rf in chosen]
        for name in sorted({n for n in names if names.count(n) > 1}):
            # TRL logs each function as rewards/<name>/mean: two of one name would write one curve
            self.add_error(None, f"Two reward functions are named {name!r} (yours and a shared one): pick one.")
        data["rewards"] = []
        for rf in chosen:
            number, weight = data.get(f"version_{rf.pk}"), data.get(f"weight_{rf.pk}")
            version = next((v for v in rf.versions.all() if v.number == number), None)
            if version is None or weight is None:
                continue  # the version or weight field carries its own error
            data["rewards"].append({"name": rf.name, "weight": weight, "version_id": version.pk,
                                    "version": version.number})
        data["config"] = {name: data.get(name) for name in self.config_fields}
        data["kind"] = self.kind
        data["evaluation"] = {name: f.default if data.get(name) in (None, "") else data[name]
                              for name, f in EVAL_FIELDS.items()}
        data["evaluation"]["eval_solved_by"] = (data["evaluation"]["eval_solved_by"] or "").strip()
        if self.is_sft and data["evaluation"]["eval_steps"] and not chosen:
            self.add_error("eval_steps", "Pick the reward functions that score the evaluations, or set eval_steps "
                                         "to 0.")
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
