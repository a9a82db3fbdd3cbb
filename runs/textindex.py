"""Indexed text search of prompts and completions, on both databases: ``has_text``, a lookup on the stored text.

``Rollout.objects.filter(completion__has_text="wait, let me")`` finds the rows whose completion contains the text, in
any case, through an index:

- PostgreSQL: ``ILIKE`` over a ``pg_trgm`` GIN index on each column (runs/migrations/0038). The index answers any
  text of three characters or more; shorter text is checked row by row (it is common, so a sorted scan meets its
  matches early). The planner chooses between the index and the sorted scan by how common the text looks.
- SQLite: an FTS5 table with the trigram tokenizer, ``runs_rollout_fts``, over the rollouts table (external content:
  it holds the index, not a second copy of the text), kept up to date by triggers. Text of three characters or more
  is a quoted FTS5 string (a phrase of its trigrams: the substring, any case); shorter text is ``LIKE``.

What a user types is matched literally: LIKE's ``%`` and ``_``, FTS5's and tsquery's syntax, quotes and NUL are text,
not operators. A stored text is its escaped form (runs.text.stored_text): the searched text is escaped the same way.

No Django models here: the models register the lookup on their text fields; the migration and ``ensure_sqlite_index``
use the SQL below.
"""

from __future__ import annotations

from contextvars import ContextVar

from django.db.models import Lookup

from runs.text import stored_text

MIN_INDEXED = 3  # a trigram index answers text of at least this many characters
# Set while a query is read row by row in its sorted order, without the text index (runs.rollouts.filters.guarded:
# a common text's first page is met sooner that way than by checking every row the index names)
SCAN_ONLY: ContextVar[bool] = ContextVar("grpo_web_text_scan_only", default=False)
FTS_TABLE = "runs_rollout_fts"
FTS_COLUMNS = ("prompt", "completion")

SQLITE_TABLE = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(prompt, completion, content='runs_rollout', "
    "content_rowid='id', tokenize='trigram')"
)
SQLITE_TRIGGERS = (
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_insert AFTER INSERT ON runs_rollout BEGIN
        INSERT INTO {FTS_TABLE}(rowid, prompt, completion) VALUES (new.id, new.prompt, new.completion);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_delete AFTER DELETE ON runs_rollout BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, prompt, completion)
            VALUES ('delete', old.id, old.prompt, old.completion);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_update AFTER UPDATE OF prompt, completion ON runs_rollout BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, prompt, completion)
            VALUES ('delete', old.id, old.prompt, old.completion);
        INSERT INTO {FTS_TABLE}(rowid, prompt, completion) VALUES (new.id, new.prompt, new.completion);
    END""",
)
SQLITE_REBUILD = f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')"
SQLITE_DROP = (
    "DROP TRIGGER IF EXISTS runs_rollout_fts_insert",
    "DROP TRIGGER IF EXISTS runs_rollout_fts_delete",
    "DROP TRIGGER IF EXISTS runs_rollout_fts_update",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
)
# PostgreSQL: the extension (a managed PostgreSQL allows pg_trgm; creating it needs the CREATE privilege on the
# database, which the owner of the database has), then one index per column
PG_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm"


def pg_indexes(*, concurrently: bool) -> tuple[str, ...]:
    """The trigram indexes' CREATE statements. ``concurrently``: built without locking out the ingest, which a
    partitioned table (runs.partitions, from migration 0045 on) does not allow."""
    how = "CONCURRENTLY IF NOT EXISTS " if concurrently else ""
    return tuple(
        f"CREATE INDEX {how}rollout_{column}_trgm ON runs_rollout USING gin ({column} gin_trgm_ops)"
        for column in FTS_COLUMNS
    )


def pg_drops(*, concurrently: bool) -> tuple[str, ...]:
    how = "CONCURRENTLY " if concurrently else ""
    return tuple(f"DROP INDEX {how}IF EXISTS rollout_{column}_trgm" for column in FTS_COLUMNS)


PG_INDEXES = pg_indexes(concurrently=True)  # migration 0038, on the table as it was then
PG_DROP = pg_drops(concurrently=True)


def like_pattern(text: str) -> str:
    """``%text%`` with LIKE's own characters (``\\``, ``%``, ``_``) taken literally (the default escape, ``\\``)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def fts_string(column: str, text: str) -> str:
    """An FTS5 query for ``text`` as a substring of ``column``: a quoted string (its quotes doubled), so nothing in it
    is FTS5 syntax; the trigram tokenizer matches it as a phrase of its trigrams, in any case."""
    return f'{column} : "' + text.replace('"', '""') + '"'


class InRuns(str):
    """Text to find in these runs' rows only: ``completion__has_text=InRuns("wait", [run.pk])``. On PostgreSQL the
    index subquery then names the runs, so it reads only their partitions' trigram indexes (runs.partitions), not
    those of every run in the table."""

    runs: tuple[int, ...]

    def __new__(cls, text: str, runs) -> InRuns:
        made = super().__new__(cls, text)
        made.runs = tuple(int(r) for r in runs)
        return made


class HasText(Lookup):
    """``<text column>__has_text=<text>``: the column contains ``text``, any case, found through the text index."""

    lookup_name = "has_text"
    prepare_rhs = False

    def _text(self) -> str:
        return stored_text(str(self.rhs))

    def _indexed(self) -> bool:
        return self.lhs.target.column in FTS_COLUMNS and self.lhs.target.model._meta.db_table == "runs_rollout"

    def as_postgresql(self, compiler, connection):
        lhs, params = self.process_lhs(compiler, connection)
        text = self._text()
        if len(text) < MIN_INDEXED or not self._indexed() or SCAN_ONLY.get():
            return f"{lhs}::text ILIKE %s", [*params, like_pattern(text)]
        # the rows the trigram index names, as a subquery of its own (OFFSET 0 keeps the planner from folding it
        # into the outer query, where it would rather scan the run's rows and check each)
        column = connection.ops.quote_name(self.lhs.target.column)
        runs = getattr(self.rhs, "runs", ())
        # the runs as numbers in the text: the planner leaves out every other run's partition before it starts
        within = f"run_id IN ({', '.join(str(r) for r in runs)}) AND " if runs else ""
        return (
            f'"{self.lhs.alias}"."id" IN (SELECT id FROM runs_rollout WHERE {within}{column} ILIKE %s OFFSET 0)',
            [*params, like_pattern(text)],
        )

    def as_sqlite(self, compiler, connection):
        lhs, params = self.process_lhs(compiler, connection)
        text = self._text()
        column = self.lhs.target.column
        if (
            len(text) < MIN_INDEXED
            or column not in FTS_COLUMNS
            or self.lhs.target.model._meta.db_table != "runs_rollout"
            or SCAN_ONLY.get()
        ):
            return f"{lhs} LIKE %s ESCAPE '\\'", [*params, like_pattern(text)]
        rowid = f'"{self.lhs.alias}"."id"'
        return (
            f"{rowid} IN (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s)",
            [*params, fts_string(column, text)],
        )

    def as_sql(self, compiler, connection):  # another database: a scan, the same meaning
        lhs, params = self.process_lhs(compiler, connection)
        return f"UPPER({lhs}) LIKE UPPER(%s) ESCAPE '\\'", [*params, like_pattern(self._text())]


def ensure_sqlite_index(connection) -> bool:
    """On SQLite, the FTS5 table and its triggers where a schema change took them away (Django remakes a table to
    alter it, and a dropped table takes its triggers along), rebuilt from the rows when the table was missing. True
    when something was made."""
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE name = 'runs_rollout'")
        if not cursor.fetchone():
            return False
        cursor.execute(
            "SELECT count(*) FROM sqlite_master WHERE name IN (%s, %s, %s, %s)",
            [FTS_TABLE, "runs_rollout_fts_insert", "runs_rollout_fts_delete", "runs_rollout_fts_update"],
        )
        if cursor.fetchone()[0] == 4:
            return False
        cursor.execute(SQLITE_TABLE)
        for trigger in SQLITE_TRIGGERS:
            cursor.execute(trigger)
        # a table made now, or triggers lost while rows came in: the index is remade from the rows
        cursor.execute(SQLITE_REBUILD)
        return True
