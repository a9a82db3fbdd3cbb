"""Column types the models share."""

from django.db import models

from runs.text import exact_json, exact_text, stored_json, stored_text
from runs.textindex import HasText, packed_text, unpacked_text


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


class PackedTextField(ExactTextField):
    """Long text (a completion) kept compressed on SQLite, which compresses nothing itself (PostgreSQL compresses it
    in TOAST): written as a zlib blob (runs.textindex.packed_text), read back as text. Rows written as text before
    read back as they are. Every lookup, function and the text index read it through ``grpo_text()`` on SQLite, a
    function each SQLite connection gets (runs.textindex.register_sqlite_functions)."""

    packed = True

    def get_db_prep_save(self, value, connection):
        value = super().get_db_prep_save(value, connection)
        return packed_text(value) if connection.vendor == "sqlite" and isinstance(value, str) else value

    def from_db_value(self, value, expression, connection):
        return super().from_db_value(unpacked_text(value), expression, connection)

    def get_lookup(self, lookup_name):
        found = super().get_lookup(lookup_name)
        if found is None or lookup_name == "has_text":
            return found
        return _reading_text(found)

    def deconstruct(self):  # a text column in the database and in migrations
        name, _, args, kwargs = super().deconstruct()
        return name, "runs.models.fields.ExactTextField", args, kwargs


class AsText(models.Func):
    """A packed text column read as text in SQL (``Left(AsText("completion"), 80)``): ``grpo_text(column)`` on
    SQLite, the column itself elsewhere."""

    template = "%(expressions)s"
    output_field = models.TextField()

    def as_sqlite(self, compiler, connection, **extra):
        return super().as_sql(compiler, connection, template="grpo_text(%(expressions)s)", **extra)


_READING: dict = {}


def _reading_text(lookup):
    """``lookup`` that reads a packed column as text on SQLite."""
    if lookup not in _READING:

        class Reading(lookup):
            def process_lhs(self, compiler, connection, lhs=None):
                sql, params = super().process_lhs(compiler, connection, lhs)
                return (f"grpo_text({sql})" if connection.vendor == "sqlite" else sql), params

        Reading.__name__ = f"Reading{lookup.__name__}"
        _READING[lookup] = Reading
    return _READING[lookup]


class ExactJSONField(models.JSONField):
    """JSON stored as it was given, NUL included in any text or key of it (jsonb cannot hold one): written through
    runs.text.stored_json and read back through exact_json. A key or value lookup on text without NUL or U+2400
    (every other text) sees it as it is."""

    def get_prep_value(self, value):
        return super().get_prep_value(stored_json(value))

    def from_db_value(self, value, expression, connection):
        return exact_json(super().from_db_value(value, expression, connection))
