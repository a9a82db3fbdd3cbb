"""Indexed text search of prompts and completions, on both databases: ``has_text``, a lookup on the stored text.

``Rollout.objects.filter(completion__has_text="wait, let me")`` finds the rows whose completion contains the text, in
any case, through an index:

- PostgreSQL: ``ILIKE`` over a ``pg_trgm`` GIN index on the completions (runs/migrations/0038) and on the runs'
  prompts (0046). The index answers any text of three characters or more; shorter text is checked row by row (it is
  common, so a sorted scan meets its matches early). The planner chooses between the index and the sorted scan by how
  common the text looks.
- SQLite: FTS5 tables with the trigram tokenizer, ``runs_rollout_fts`` over the completions and
  ``runs_runprompt_fts`` over the runs' prompts (external content: they hold the index, not a second copy of the
  text; ``detail=none``: which rows hold a trigram, not where, a thirtieth of the size with positions), kept up to
  date by triggers. Text of three characters or more finds the rows holding each of its trigrams, then checks each
  of them exactly; shorter text is ``LIKE``.

A rollout's prompt is searched through its run's prompts (``runs_runprompt``, one row per run and prompt key, filled by
a trigger on each database from every stored rollout): the keys of the prompts holding the text, then the run's rows
with those keys (the ``rollout_run_prompt`` index). A key is a hash of the prompt's text, so a key found in one run
names the same prompt in any other. A prompt repeated in a thousand rows is indexed and matched once.

What a user types is matched literally: LIKE's ``%`` and ``_``, FTS5's and tsquery's syntax, quotes and NUL are text,
not operators. A stored text is its escaped form (runs.text.stored_text): the searched text is escaped the same way.

No Django models here: the models register the lookup on their text fields; migration 0046 and ``ensure_sqlite_index``
use the SQL below (a migration that changes it writes out, in the earlier migrations, the SQL they ran, as 0038 and
0045 do).
"""

from __future__ import annotations

import zlib
from contextvars import ContextVar

from django.db.models import Lookup

from runs.text import stored_text

MIN_INDEXED = 3  # a trigram index answers text of at least this many characters
# Set while a query is read row by row in its sorted order, without the text index (runs.rollouts.filters.guarded:
# a common text's first page is met sooner that way than by checking every row the index names)
SCAN_ONLY: ContextVar[bool] = ContextVar("grpo_web_text_scan_only", default=False)
FTS_TABLE = "runs_rollout_fts"
PROMPTS = "runs_runprompt"  # one row per (run, prompt): runs.models.RunPrompt
PROMPTS_FTS = "runs_runprompt_fts"
# the indexed text columns, by table; a rollout's prompt is searched through its run's prompts (``prompt_key``)
INDEXED = {"runs_rollout": "completion", PROMPTS: "text"}

# a completion is a zlib blob on SQLite (runs.models.fields.PackedTextField): the index reads it as text, through a view
TEXT_VIEW = "runs_rollout_text"
SQLITE_TABLES = (
    f"CREATE VIEW IF NOT EXISTS {TEXT_VIEW} AS SELECT id, grpo_text(completion) AS completion FROM runs_rollout",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5(completion, content='{TEXT_VIEW}', "
    "content_rowid='id', tokenize='trigram', detail=none)",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {PROMPTS_FTS} USING fts5(text, content='{PROMPTS}', content_rowid='id', "
    "tokenize='trigram', detail=none)",
)
SQLITE_TRIGGERS = (
    # a rollout's completion into the index, its prompt into its run's prompts unless they hold it (its key)
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_insert AFTER INSERT ON runs_rollout BEGIN
        INSERT INTO {FTS_TABLE}(rowid, completion) VALUES (new.id, grpo_text(new.completion));
        INSERT OR IGNORE INTO {PROMPTS}(run_id, key, text) VALUES (new.run_id, new.prompt_key, new.prompt);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_delete AFTER DELETE ON runs_rollout BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, completion) VALUES ('delete', old.id, grpo_text(old.completion));
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_rollout_fts_update AFTER UPDATE OF completion ON runs_rollout BEGIN
        INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, completion) VALUES ('delete', old.id, grpo_text(old.completion));
        INSERT INTO {FTS_TABLE}(rowid, completion) VALUES (new.id, grpo_text(new.completion));
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_runprompt_fts_insert AFTER INSERT ON {PROMPTS} BEGIN
        INSERT INTO {PROMPTS_FTS}(rowid, text) VALUES (new.id, new.text);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_runprompt_fts_delete AFTER DELETE ON {PROMPTS} BEGIN
        INSERT INTO {PROMPTS_FTS}({PROMPTS_FTS}, rowid, text) VALUES ('delete', old.id, old.text);
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS runs_runprompt_fts_update AFTER UPDATE OF text ON {PROMPTS} BEGIN
        INSERT INTO {PROMPTS_FTS}({PROMPTS_FTS}, rowid, text) VALUES ('delete', old.id, old.text);
        INSERT INTO {PROMPTS_FTS}(rowid, text) VALUES (new.id, new.text);
    END""",
)
SQLITE_TRIGGER_NAMES = tuple(t.split("EXISTS ", 1)[1].split(" ", 1)[0] for t in SQLITE_TRIGGERS)
# the prompts of rows stored before their triggers were there (one per run and key, the first stored)
SQLITE_FILL_PROMPTS = (
    f"INSERT OR IGNORE INTO {PROMPTS}(run_id, key, text) "
    "SELECT run_id, prompt_key, prompt FROM runs_rollout ORDER BY id"
)
SQLITE_REBUILDS = tuple(f"INSERT INTO {table}({table}) VALUES ('rebuild')" for table in (FTS_TABLE, PROMPTS_FTS))
SQLITE_DROP = (
    *(f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGER_NAMES),
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
    f"DROP TABLE IF EXISTS {PROMPTS_FTS}",
    f"DROP VIEW IF EXISTS {TEXT_VIEW}",
)
# PostgreSQL: the extension (a managed PostgreSQL allows pg_trgm; creating it needs the CREATE privilege on the
# database, which the owner of the database has), one trigram index per indexed column, and a statement trigger that
# adds a stored batch's new prompts to its run's prompts (COPY fires it too: the ingest's path)
PG_EXTENSION = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
PG_PROMPTS_INDEX = f"CREATE INDEX IF NOT EXISTS runprompt_text_trgm ON {PROMPTS} USING gin (text gin_trgm_ops)"
PG_PROMPTS_TRIGGER = (
    f"""CREATE OR REPLACE FUNCTION runs_rollout_prompts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {PROMPTS} (run_id, key, text)
            SELECT DISTINCT ON (run_id, prompt_key) run_id, prompt_key, prompt FROM stored
            ORDER BY run_id, prompt_key
            ON CONFLICT DO NOTHING;
        RETURN NULL;
    END $$""",
    "DROP TRIGGER IF EXISTS runs_rollout_prompts ON runs_rollout",
    "CREATE TRIGGER runs_rollout_prompts AFTER INSERT ON runs_rollout REFERENCING NEW TABLE AS stored "
    "FOR EACH STATEMENT EXECUTE FUNCTION runs_rollout_prompts()",
)
PG_PROMPTS_DROP = (
    "DROP TRIGGER IF EXISTS runs_rollout_prompts ON runs_rollout",
    "DROP FUNCTION IF EXISTS runs_rollout_prompts()",
)
PG_FILL_PROMPTS = (
    f"INSERT INTO {PROMPTS} (run_id, key, text) SELECT DISTINCT ON (run_id, prompt_key) run_id, prompt_key, prompt "
    "FROM runs_rollout ORDER BY run_id, prompt_key, id ON CONFLICT DO NOTHING"
)


def pg_indexes(*, concurrently: bool) -> tuple[str, ...]:
    """The rollouts' trigram index's CREATE statement. ``concurrently``: built without locking out the ingest, which
    a partitioned table (runs.partitions, from migration 0045 on) does not allow."""
    how = "CONCURRENTLY IF NOT EXISTS " if concurrently else ""
    return (f"CREATE INDEX {how}rollout_completion_trgm ON runs_rollout USING gin (completion gin_trgm_ops)",)


def pg_drops(*, concurrently: bool) -> tuple[str, ...]:
    how = "CONCURRENTLY " if concurrently else ""
    return (f"DROP INDEX {how}IF EXISTS rollout_completion_trgm",)


def like_pattern(text: str) -> str:
    """``%text%`` with LIKE's own characters (``\\``, ``%``, ``_``) taken literally (the default escape, ``\\``)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


MAX_TRIGRAMS = 24  # a longer text's candidates are the rows holding this many of its trigrams, spread along it


def fts_trigrams(text: str) -> str:
    """An FTS5 query for the rows that hold every trigram of ``text``, in any case: the candidates of a substring
    search, each then checked exactly (``HasText``). The index keeps no positions (``detail=none``: a thirtieth of
    the positions' size on bench.search's text), so the query names trigrams, not a phrase. Each is a quoted string,
    its quotes doubled: nothing in it is FTS5 syntax."""
    grams = list(dict.fromkeys(text.lower()[i : i + 3] for i in range(len(text) - 2)))
    if len(grams) > MAX_TRIGRAMS:
        grams = [grams[i * len(grams) // MAX_TRIGRAMS] for i in range(MAX_TRIGRAMS)]
    return " AND ".join('"' + gram.replace('"', '""') + '"' for gram in grams)


def sqlite_contains(lhs: str, text: str) -> tuple[str, list[str]]:
    """SQL that ``lhs`` holds ``text`` in any case: LIKE for ASCII text (SQLite's LIKE folds ASCII letters only),
    else ``grpo_contains``, a function each SQLite connection gets (``register_sqlite_functions``) that folds any."""
    if text.isascii():
        return f"{lhs} LIKE %s ESCAPE '\\'", [like_pattern(text)]
    return f"grpo_contains({lhs}, %s)", [text.lower()]


PACK_LEVEL = 3  # zlib's: 0.31 of bench.search's text at a third of level 6's time (0.28)


def packed_text(text: str) -> bytes:
    """Text as SQLite keeps a long text column (runs.models.fields.PackedTextField): a zlib blob of its UTF-8."""
    return zlib.compress(text.encode("utf-8", "surrogatepass"), PACK_LEVEL)


def unpacked_text(value):
    """The text ``packed_text`` packed; any other value (text stored unpacked, None) as it is."""
    return zlib.decompress(value).decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def _contains(value, folded):
    value = unpacked_text(value)
    return None if value is None or folded is None else folded in value.lower()


def register_sqlite_functions(sender, connection, **kwargs) -> None:
    """``connection_created``: the functions SQLite's text columns and search use, on every new connection:
    ``grpo_text`` (a packed text read as text) and ``grpo_contains`` (any-case containment of non-ASCII text)."""
    if connection.vendor == "sqlite":
        connection.connection.create_function("grpo_text", 1, unpacked_text, deterministic=True)
        connection.connection.create_function("grpo_contains", 2, _contains, deterministic=True)


def completion_candidates(connection, text: str, runs, limit: int) -> list[int]:
    """Ids of the completions the text index names for ``text`` (at most ``limit`` + 1 of them), read until then: on
    SQLite every run's rows holding each of its trigrams (before the exact check), on PostgreSQL ``runs``' rows
    holding it. Cheap for any text: a common one stops at ``limit`` + 1 (a lookup that checks every row it names,
    the way ``has_text`` does in a query, reads them all first). Whoever reads these rows checks them exactly."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s LIMIT %s",
                [fts_trigrams(stored_text(text)), limit + 1],
            )
        else:
            within = f"run_id IN ({', '.join(str(int(r)) for r in runs)}) AND " if runs else ""
            cursor.execute(
                f"SELECT id FROM runs_rollout WHERE {within}completion ILIKE %s LIMIT %s",
                [like_pattern(stored_text(text)), limit + 1],
            )
        return [row[0] for row in cursor.fetchall()]


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

    def _index(self) -> str | None:
        """How the column is indexed: "own" (its table's trigram index), "prompts" (a rollout's prompt: through its
        run's prompts, runs_runprompt, matched by key), or None (read row by row)."""
        table, column = self.lhs.target.model._meta.db_table, self.lhs.target.column
        if len(self._text()) < MIN_INDEXED or SCAN_ONLY.get():
            return None
        if INDEXED.get(table) == column:
            return "own"
        if (table, column) == ("runs_rollout", "prompt"):
            return "prompts"
        return None

    def _runs(self) -> str:
        # the runs as numbers in the text: the planner leaves out every other run's partition before it starts
        runs = getattr(self.rhs, "runs", ())
        return f"run_id IN ({', '.join(str(r) for r in runs)}) AND " if runs else ""

    def as_postgresql(self, compiler, connection):
        lhs, params = self.process_lhs(compiler, connection)
        pattern = like_pattern(self._text())
        index = self._index()
        if index is None:
            return f"{lhs}::text ILIKE %s", [*params, pattern]
        alias = self.lhs.alias
        if index == "prompts":
            return (
                f'"{alias}"."prompt_key" IN (SELECT key FROM {PROMPTS} WHERE {self._runs()}text ILIKE %s OFFSET 0)',
                [*params, pattern],
            )
        # the rows the trigram index names, as a subquery of its own (OFFSET 0 keeps the planner from folding it
        # into the outer query, where it would rather scan the run's rows and check each)
        table = connection.ops.quote_name(self.lhs.target.model._meta.db_table)
        column = connection.ops.quote_name(self.lhs.target.column)
        within = self._runs() if table == '"runs_rollout"' else ""
        return (
            f'"{alias}"."id" IN (SELECT id FROM {table} WHERE {within}{column} ILIKE %s OFFSET 0)',
            [*params, pattern],
        )

    def as_sqlite(self, compiler, connection):
        lhs, params = self.process_lhs(compiler, connection)
        if getattr(self.lhs.target, "packed", False):  # a zlib blob (runs.models.fields.PackedTextField)
            lhs = f"grpo_text({lhs})"
        text = self._text()
        index = self._index()
        if index is None:  # row by row: any case, as the index's check
            check, check_params = sqlite_contains(lhs, text)
            return check, [*params, *check_params]
        # the candidates the index names (rows holding every trigram of the text), each checked exactly
        alias = self.lhs.alias
        if index == "prompts":
            check, check_params = sqlite_contains("text", text)
            return (
                f'"{alias}"."prompt_key" IN (SELECT key FROM {PROMPTS} WHERE '
                f"{self._runs()}id IN (SELECT rowid FROM {PROMPTS_FTS} WHERE {PROMPTS_FTS} MATCH %s) AND {check})",
                [*params, fts_trigrams(text), *check_params],
            )
        fts = FTS_TABLE if self.lhs.target.model._meta.db_table == "runs_rollout" else PROMPTS_FTS
        check, check_params = sqlite_contains(lhs, text)
        return (
            f'"{alias}"."id" IN (SELECT rowid FROM {fts} WHERE {fts} MATCH %s) AND {check}',
            [fts_trigrams(text), *params, *check_params],
        )

    def as_sql(self, compiler, connection):  # another database: a scan, the same meaning
        lhs, params = self.process_lhs(compiler, connection)
        return f"UPPER({lhs}) LIKE UPPER(%s) ESCAPE '\\'", [*params, like_pattern(self._text())]


def ensure_sqlite_index(connection) -> bool:
    """On SQLite, the FTS5 tables and their triggers where a schema change took them away (Django remakes a table to
    alter it, and a dropped table takes its triggers along), rebuilt from the rows when something was missing. True
    when something was made."""
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sqlite_master WHERE name IN ('runs_rollout', %s)", [PROMPTS])
        if cursor.fetchone()[0] < 2:
            return False
        names = (TEXT_VIEW, FTS_TABLE, PROMPTS_FTS, *SQLITE_TRIGGER_NAMES)
        cursor.execute(
            f"SELECT count(*) FROM sqlite_master WHERE name IN ({', '.join(['%s'] * len(names))})", list(names)
        )
        if cursor.fetchone()[0] == len(names):
            return False
        for statement in (*SQLITE_TABLES, *SQLITE_TRIGGERS):
            cursor.execute(statement)
        # a table made now, or triggers lost while rows came in: the prompts and the indexes are remade from the rows
        cursor.execute(SQLITE_FILL_PROMPTS)
        for statement in SQLITE_REBUILDS:
            cursor.execute(statement)
        return True
