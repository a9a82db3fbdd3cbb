"""A run's prompts, once each (runs.models.RunPrompt), and the prompt search moved onto them.

Every rollout stored its prompt and the text index indexed every copy (a prompt repeats in each completion of its
group and each step that samples it again). The prompts of the rows stored before are copied in, one per (run, key);
a trigger adds those of every later row. On PostgreSQL the rollouts' prompt trigram index is dropped. On SQLite the
FTS5 table is remade with the completion alone, without positions (``detail=none``), read through a view that unpacks
the completions stored compressed from now on (runs.models.fields.PackedTextField; rows stored before stay text and
read as they did): the rows are indexed again, about a minute per 50,000 long completions."""

import importlib

import django.db.models.deletion
from django.db import migrations, models

import runs.models.fields
from runs import textindex
from runs.text import prompt_key

PG_PROMPT_INDEX = "CREATE INDEX IF NOT EXISTS rollout_prompt_trgm ON runs_rollout USING gin (prompt gin_trgm_ops)"


def _keys(cursor, vendor: str):
    """Rows stored without a prompt key get theirs (the ingest always gave one; a row written otherwise may lack it)."""
    if vendor == "postgresql":
        cursor.execute(
            "UPDATE runs_rollout SET prompt_key = substr(encode(sha256(convert_to(prompt, 'UTF8')), 'hex'), 1, 16) "
            "WHERE prompt_key = ''"
        )
        return
    cursor.execute("SELECT id, prompt FROM runs_rollout WHERE prompt_key = ''")
    cursor.executemany(
        "UPDATE runs_rollout SET prompt_key = %s WHERE id = %s", [(prompt_key(p), i) for i, p in cursor.fetchall()]
    )


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        _keys(cursor, connection.vendor)
        if connection.vendor == "postgresql":
            # the copied prompts' foreign keys checked as they go in: an index cannot be built on a table with
            # checks still pending in the transaction
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for statement in textindex.PG_PROMPTS_TRIGGER:
                cursor.execute(statement)
            cursor.execute(textindex.PG_FILL_PROMPTS)
            cursor.execute(textindex.PG_PROMPTS_INDEX)
            cursor.execute("DROP INDEX IF EXISTS rollout_prompt_trgm")
        elif connection.vendor == "sqlite":
            for statement in importlib.import_module("runs.migrations.0038_rollout_text_index").SQLITE_DROP:
                cursor.execute(statement)
            textindex.ensure_sqlite_index(connection)


def backwards(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(PG_PROMPT_INDEX)
            for statement in textindex.PG_PROMPTS_DROP:
                cursor.execute(statement)
        elif connection.vendor == "sqlite":
            for statement in textindex.SQLITE_DROP:
                cursor.execute(statement)
            before = importlib.import_module("runs.migrations.0038_rollout_text_index")
            for statement in (before.SQLITE_TABLE, *before.SQLITE_TRIGGERS, before.SQLITE_REBUILD):
                cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0045_rollout_partitions"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunPrompt",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", models.CharField(help_text="Rollout.prompt_key: a hash of the prompt.", max_length=16)),
                (
                    "text",
                    runs.models.fields.ExactTextField(
                        help_text="The prompt, as the first stored rollout with this key had it."
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="prompts",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("run", "key"), name="run_prompt_key")],
            },
        ),
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
