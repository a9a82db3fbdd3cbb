"""The rollouts' text index (runs.textindex): pg_trgm GIN indexes on PostgreSQL, an FTS5 trigram table with its
triggers on SQLite, filled from the rows already there. Not atomic: PostgreSQL builds the indexes concurrently, so a
deployment's ingest goes on while they build."""

from django.db import migrations

from runs import textindex


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(textindex.PG_EXTENSION)
            for statement in textindex.PG_INDEXES:
                cursor.execute(statement)
        elif connection.vendor == "sqlite":
            cursor.execute(textindex.SQLITE_TABLE)
            for statement in textindex.SQLITE_TRIGGERS:
                cursor.execute(statement)
            cursor.execute(textindex.SQLITE_REBUILD)


def backwards(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for statement in textindex.PG_DROP:
                cursor.execute(statement)
        elif connection.vendor == "sqlite":
            for statement in textindex.SQLITE_DROP:
                cursor.execute(statement)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0037_run_import_notes"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
