"""Form pieces the capabilities share: a form field built from a config dataclass field, a JSON object field that
survives hostile input, rows picked by key, yes/no choices."""

from __future__ import annotations

from django import forms
from django.forms.fields import InvalidJSONInput


class JSONObjectField(forms.JSONField):
    """A JSON object (or nothing); text nested too deeply for Python's parser is an error, not a crash."""

    def to_python(self, value):
        try:
            value = super().to_python(value)
        except RecursionError:
            raise forms.ValidationError("This JSON is nested too deeply.", code="invalid") from None
        if value not in (None, "") and not isinstance(value, dict):
            raise forms.ValidationError('Give a JSON object: {"name": value, ...}.', code="invalid")
        return value

    def bound_data(self, data, initial):
        try:
            return super().bound_data(data, initial)
        except RecursionError:  # shown back as the text it was
            return InvalidJSONInput(data)


class PkMultipleChoiceField(forms.ModelMultipleChoiceField):
    """Model rows picked by primary key, where a value that cannot be a key (text, or a number no 64-bit column
    holds: SQLite cannot even bind it) is the field's own "not a valid value" error, not a database error."""

    def _check_values(self, value):
        for pk in value:
            try:
                if not -(1 << 63) <= int(str(pk).strip()) < (1 << 63):
                    raise ValueError
            except ValueError:
                raise forms.ValidationError(
                    self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": pk}
                ) from None
        return super()._check_values(value)


def config_field(name, f):
    """A form field for one field of grpo_web_protocol.config (GRPOFields, EvalFields): its TRL default and help."""
    default, help_text = f.default, f.metadata["help"]
    optional = default is None
    common = {"initial": default, "help_text": help_text, "required": not optional}
    if "choices" in f.metadata:
        return forms.ChoiceField(choices=[(c, c) for c in f.metadata["choices"]], **common)
    if isinstance(default, bool):
        return forms.BooleanField(**{**common, "required": False})
    if f.type.startswith("bool"):  # optional: blank leaves it to TRL
        return forms.TypedChoiceField(
            choices=[("", "TRL's default"), ("True", "yes"), ("False", "no")],
            coerce=lambda v: v == "True",
            empty_value=None,
            **common,
        )
    if isinstance(default, str):
        return forms.CharField(max_length=200, **{**common, "required": False})
    if isinstance(default, int) or f.type.startswith("int"):
        return forms.IntegerField(min_value=f.metadata.get("min"), **common)
    return forms.FloatField(min_value=f.metadata.get("min"), **common)


YES_NO = [("", "any"), ("yes", "yes"), ("no", "no")]
