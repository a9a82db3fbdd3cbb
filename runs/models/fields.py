"""Column types the models share."""

from django.db import models

from runs.text import exact_json, exact_text, stored_json, stored_text
from runs.textindex import HasText


class ExactTextField(models.TextField):
    """Text stored as it was given, NUL included (PostgreSQL text cannot hold one): written through
    runs.text.stored_text and read back through exact_text, for every read the ORM makes (rows, values(), exports,
    the API). A search (contains, icontains) sees the stored form."""

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return stored_text(value) if isinstance(value, str) else value

    def from_db_value(self, value, expression, connection):
        return exact_text(value) if isinstance(value, str) else value


ExactTextField.register_lookup(HasText)  # indexed search (runs.textindex)


class ExactJSONField(models.JSONField):
    """JSON stored as it was given, NUL included in any text or key of it (jsonb cannot hold one): written through
    runs.text.stored_json and read back through exact_json. A key or value lookup on text without NUL or U+2400
    (every other text) sees it as it is."""

    def get_prep_value(self, value):
        return super().get_prep_value(stored_json(value))

    def from_db_value(self, value, expression, connection):
        return exact_json(super().from_db_value(value, expression, connection))
