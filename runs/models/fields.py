"""Column types the models share."""

from django.db import models

from runs.text import exact_text, stored_text
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
