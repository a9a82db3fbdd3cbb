"""PostgreSQL: the rollouts table partitioned by run (runs.partitions). SQLite: nothing.

The rows stored before stay where they are: the old table becomes the partition of the runs it holds
(``runs_rollout_legacy``), its indexes attached as they are; only a primary key on (id, run_id) is built for it, since
a partitioned table's keys hold its partition key. New runs get a partition each; ``runs_rollout_default`` takes the
rows of a run that has none. Ids go on from the old table's."""

from django.db import migrations

from runs import partitions

TABLE, LEGACY, DEFAULT = partitions.TABLE, partitions.LEGACY, partitions.DEFAULT
# the parent's indexes and constraints as they were at this migration (Django's model state names, and the text
# index's two trigram indexes; migration 0046 moved the prompt's to runs_runprompt): written out, so that a later
# change of the models or of runs.textindex does not change what this migration does
INDEXES = (
    f"ALTER TABLE {TABLE} ADD CONSTRAINT runs_rollout_pkey PRIMARY KEY (id, run_id)",
    f'ALTER TABLE {TABLE} ADD CONSTRAINT rollout_key UNIQUE (run_id, step, "index")',
    f"CREATE INDEX rollout_prompt_trgm ON {TABLE} USING gin (prompt gin_trgm_ops)",
    f"CREATE INDEX rollout_completion_trgm ON {TABLE} USING gin (completion gin_trgm_ops)",
    f"CREATE INDEX rollout_run_advantage ON {TABLE} (run_id, reward_bucket, advantage, id, reward, step, length, "
    "zero_std, reflective, truncated, reflection_mask)",
    f"CREATE INDEX rollout_run_prompt ON {TABLE} (run_id, prompt_key, step)",
)
INDEX_NAMES = ("rollout_completion_trgm", "rollout_prompt_trgm", "rollout_run_advantage", "rollout_run_prompt")
LIKE = "INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING IDENTITY"


def _next_id(cursor, table: str) -> int:
    cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
    largest = cursor.fetchone()[0]
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
    sequence = cursor.fetchone()[0]
    if sequence:
        cursor.execute(f"SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM {sequence}")
        largest = max(largest, cursor.fetchone()[0])
    return largest + 1


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        if partitions.is_partitioned(cursor):
            return
        cursor.execute(f"SELECT DISTINCT run_id FROM {TABLE} ORDER BY run_id")
        runs = [row[0] for row in cursor.fetchall()]
        start = _next_id(cursor, TABLE)
        cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {LEGACY}")
        cursor.execute(f"ALTER TABLE {LEGACY} DROP CONSTRAINT runs_rollout_pkey")
        cursor.execute(f"ALTER TABLE {LEGACY} RENAME CONSTRAINT rollout_key TO {LEGACY}_key")
        for index in INDEX_NAMES:
            cursor.execute(f"ALTER INDEX IF EXISTS {index} RENAME TO {index}_legacy")
        cursor.execute(f"CREATE TABLE {TABLE} (LIKE {LEGACY} {LIKE}) PARTITION BY LIST (run_id)")
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id RESTART WITH {start}")
        for statement in INDEXES:
            cursor.execute(statement)
        cursor.execute(f"ALTER TABLE {LEGACY} ALTER COLUMN id DROP IDENTITY IF EXISTS")
        if runs:
            listed = ", ".join(str(int(r)) for r in runs)
            cursor.execute(f"ALTER TABLE {LEGACY} ADD CONSTRAINT {LEGACY}_pkey PRIMARY KEY (id, run_id)")
            # proves the partition's bound, so ATTACH need not scan the rows again
            cursor.execute(f"ALTER TABLE {LEGACY} ADD CONSTRAINT {LEGACY}_runs CHECK (run_id IN ({listed}))")
            cursor.execute(f"ALTER TABLE {TABLE} ATTACH PARTITION {LEGACY} FOR VALUES IN ({listed})")
            cursor.execute(f"ALTER TABLE {LEGACY} DROP CONSTRAINT {LEGACY}_runs")
        else:
            cursor.execute(f"DROP TABLE {LEGACY}")
        cursor.execute(f"CREATE TABLE {DEFAULT} PARTITION OF {TABLE} DEFAULT")


def unpartition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        if not partitions.is_partitioned(cursor):
            return
        start = _next_id(cursor, TABLE)
        cursor.execute(f"CREATE TABLE {TABLE}_plain (LIKE {TABLE} {LIKE})")
        cursor.execute(f"INSERT INTO {TABLE}_plain SELECT * FROM {TABLE}")
        cursor.execute(f"DROP TABLE {TABLE} CASCADE")
        cursor.execute(f"ALTER TABLE {TABLE}_plain RENAME TO {TABLE}")
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id RESTART WITH {start}")
        cursor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT runs_rollout_pkey PRIMARY KEY (id)")
        for statement in INDEXES[1:]:
            cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("runs", "0044_exact_json")]

    operations = [migrations.RunPython(partition, unpartition, elidable=False)]
