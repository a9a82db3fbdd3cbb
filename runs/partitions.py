"""The rollouts table on PostgreSQL: one partition per run (declarative partitioning, LIST on run_id).

A team keeps dozens of runs of a million long completions each in one table. Partitioned by run:

- a run's queries read its own partition and its own indexes (the planner prunes the others): a search within a run
  walks the trigram index of that run's rows, not of every run's (runs.textindex scopes its subquery to the runs the
  browser asked for);
- deleting a run empties its partition with TRUNCATE (no row-by-row DELETE of gigabytes, no dead rows left for
  VACUUM) and drops it;
- a finished run's partition is a table of its own, so it can be detached and moved whole: to a tablespace on
  cheaper disk, to a dump, or onto another server as a postgres_fdw foreign table attached in its place
  (docs/scale.md).

The partition of run N is ``runs_rollout_rN``, made by ``ensure_partition`` before the run's first rows are stored
(runs.rollouts.ingest). Rows of a run that has none (rows written before it was made, by a path that does not make
it) land in ``runs_rollout_default`` and are read as well as any: a partition is a speed-up, never where correctness
lies. ``ensure_partition`` moves such rows into the partition it makes. Rows stored before the table was partitioned
stay in ``runs_rollout_legacy`` (migration 0045), one partition for the runs of then.

SQLite (the embedded default) has no partitions: every function here does nothing there.
"""

from __future__ import annotations

from django.db import OperationalError, connection, transaction

TABLE = "runs_rollout"
DEFAULT = "runs_rollout_default"
LEGACY = "runs_rollout_legacy"
# ATTACH PARTITION locks the default partition (ACCESS EXCLUSIVE) while it checks it holds none of the run's rows: a
# reader of the default partition (a search across runs) holds that up. The ingest waits this long at most, then
# stores the batch in the default partition and tries again with the next one.
LOCK_TIMEOUT_MS = 2000


def partition_name(run_id: int) -> str:
    return f"{TABLE}_r{int(run_id)}"


def is_partitioned(cursor) -> bool:
    cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s)", [TABLE])
    return cursor.fetchone() is not None


def has_partition(run_id: int) -> bool:
    """True when run ``run_id`` has a partition of its own (always False on SQLite)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_inherits WHERE inhparent = to_regclass(%s) AND inhrelid = to_regclass(%s)",
            [TABLE, partition_name(run_id)],
        )
        return cursor.fetchone() is not None


def ensure_partition(run_id: int) -> bool:
    """Make run ``run_id``'s partition unless it has one (moving any of its rows out of the default partition).
    True when the run has its partition afterwards; False on SQLite, on a table that is not partitioned, or when the
    default partition stayed locked past LOCK_TIMEOUT_MS (its rows go to the default partition meanwhile)."""
    if connection.vendor != "postgresql":
        return False
    if has_partition(run_id):
        return True
    name = partition_name(run_id)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            if not is_partitioned(cursor):
                return False
            # one maker per run at a time; a second one finds the partition made
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s), %s)", [TABLE, int(run_id)])
            cursor.execute("SELECT to_regclass(%s)", [name])
            if cursor.fetchone()[0] is None:
                cursor.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                # made beside the table, then attached: CREATE ... PARTITION OF would lock the whole table, ATTACH
                # locks only the default partition (ACCESS EXCLUSIVE) and lets every other run's readers go on
                cursor.execute(
                    f"CREATE TABLE {name} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE "
                    "INCLUDING COMPRESSION)"
                )
                cursor.execute(f"ALTER TABLE {name} ADD CONSTRAINT {name}_run CHECK (run_id = {int(run_id)})")
                cursor.execute(f"LOCK TABLE {DEFAULT} IN ACCESS EXCLUSIVE MODE")
                cursor.execute(f"INSERT INTO {name} SELECT * FROM {DEFAULT} WHERE run_id = %s", [int(run_id)])
                cursor.execute(f"DELETE FROM {DEFAULT} WHERE run_id = %s", [int(run_id)])
                # the CHECK constraint spares ATTACH its scan of the new table
                cursor.execute(f"ALTER TABLE {TABLE} ATTACH PARTITION {name} FOR VALUES IN ({int(run_id)})")
                cursor.execute(f"ALTER TABLE {name} DROP CONSTRAINT {name}_run")
                cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
    except OperationalError as exc:
        if not _lock_not_available(exc):
            raise
        return False
    return True


def _lock_not_available(exc: BaseException) -> bool:
    from psycopg.errors import LockNotAvailable  # PostgreSQL only: SQLite installs have no psycopg to load

    return isinstance(exc.__cause__, LockNotAvailable)


def drop_rollouts(run_id: int) -> bool:
    """Empty and drop run ``run_id``'s partition (in the caller's transaction): its rows go at once, with no
    row-by-row delete. True when it had one; its rows elsewhere (the default or legacy partition) are left to the
    caller's DELETE."""
    if not has_partition(run_id):
        return False
    name = partition_name(run_id)
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {name}")  # locks the partition alone
        try:
            with transaction.atomic():
                cursor.execute(f"SET LOCAL lock_timeout = {LOCK_TIMEOUT_MS}")
                cursor.execute(f"DROP TABLE {name}")  # locks the whole table, a moment
                cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
        except OperationalError as exc:  # an empty partition left behind costs nothing: the run is deleted
            if not _lock_not_available(exc):
                raise
    return True


def table_bytes(cursor) -> int:
    """The rollouts table's bytes on disk with its TOAST and indexes, every partition's (a partitioned table's own
    ``pg_total_relation_size`` is 0: its rows are its partitions')."""
    cursor.execute(
        "SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree(to_regclass(%s))", [TABLE]
    )
    return int(cursor.fetchone()[0])
