"""The rollouts' text index (runs.textindex): pg_trgm GIN indexes on PostgreSQL, an FTS5 trigram table with its
triggers on SQLite, filled from the rows already there. Not atomic: PostgreSQL builds the indexes concurrently, so a
deployment's ingest goes on while they build.

The SQL is written out as it was at this migration (migration 0046 moved the prompt's index to runs_runprompt), so that
a later change of runs.textindex does not change what this migration does."""

from django.db import migrations

FTS = "runs_rollout_fts"
PG_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
PG_INDEXES = tuple(
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS rollout_{column}_trgm ON runs_rollout USING gin ({column} gin_trgm_ops)"
    for column in ("prompt", "completion")
)
PG_DROP = tuple(f"DROP INDEX CONCURRENTLY IF EXISTS rollout_{column}_trgm" for column in ("prompt", "completion"))
SQLITE_TABLE = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING fts5(prompt, completion, content='runs_rollout', "
    "content_rowid='id', tokenize='trigram')"
)
SQLITE_TRIGGERS = (
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_insert AFTER INSERT ON runs_rollout BEGIN
        INSERT INTO {FTS}(rowid, prompt, completion) VALUES (new.id, new.prompt, new.completion);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_delete AFTER DELETE ON runs_rollout BEGIN
        INSERT INTO {FTS}({FTS}, rowid, prompt, completion)
            VALUES ('delete', old.id, old.prompt, old.completion);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_update AFTER UPDATE OF prompt, completion ON runs_rollout BEGIN
        INSERT INTO {FTS}({FTS}, rowid, prompt, completion)
            VALUES ('delete', old.id, old.prompt, old.completion);
        INSERT INTO {FTS}(rowid, prompt, completion) VALUES (new.id, new.prompt, new.completion);
    END""",
)
SQLITE_REBUILD = f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')"
SQLITE_DROP = (
    "DROP TRIGGER IF EXISTS runs_rollout_fts_insert",
    "DROP TRIGGER IF EXISTS runs_rollout_fts_delete",
    "DROP TRIGGER IF EXISTS runs_rollout_fts_update",
    f"DROP TABLE IF EXISTS {FTS}",
)


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(PG_EXTENSION)
            for statement in PG_INDEXES:
                cursor.execute(statement)
        elif connection.vendor == "sqlite":
            cursor.execute(SQLITE_TABLE)
            for statement in SQLITE_TRIGGERS:
                cursor.execute(statement)
            cursor.execute(SQLITE_REBUILD)


def backwards(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for statement in PG_DROP:
                cursor.execute(statement)
        elif connection.vendor == "sqlite":
            for statement in SQLITE_DROP:
                cursor.execute(statement)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0037_run_import_notes"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
