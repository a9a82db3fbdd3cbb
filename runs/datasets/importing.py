"""Reading datasets into an immutable Parquet file, with errors that name the line or row and the column.

Every format takes the same road: a reader yields Arrow record batches, each batch is checked with vectorised
compute and appended to a Parquet file, so a file of any size passes through in bounded memory. When that fast road
stops (pyarrow refuses a line, or a check fails), a plain Python scan of the same input finds the lines or rows and
the columns to name, up to MAX_ERRORS of them. Nothing is kept when it finds any: the caller deletes the output.

JSON lines and CSV name the line of the file (the header is line 1); JSON arrays, Parquet and Hugging Face datasets
name the row (1-based). CSV cells are read as text exactly as written: a cell such as ``=1+1`` stays that text and is
never evaluated.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import gzip
import json
import re
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pj
import pyarrow.parquet as pq

MAX_ERRORS = 20
MAX_EXPANSION = 100  # decompressed bytes per compressed byte, beyond which an input is treated as a bomb
EXPANSION_FREE_BYTES = 64 * 1024**2  # small inputs may expand more (a short, repetitive file compresses very well)
BLOCK_BYTES = 4 * 1024**2  # pyarrow read block; also the target size of one Parquet row group
SLOW_CHUNK_ROWS = 20_000
MAX_JSON_ROW_CHARS = 64 * 1024**2  # one element of a JSON array; past this an unfinished element is an error
ROLES = ("system", "developer", "user", "assistant", "tool")
GSM8K_ANSWER = r"####[ \t]*(?P<answer>[^\n]*)"  # the same pattern for RE2 (pyarrow) and Python's re
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
FORMAT_NAMES = {"jsonl": "JSON lines", "json": "JSON", "csv": "CSV", "parquet": "a Parquet file"}
REFUSED_ARCHIVES = (".tar", ".tgz", ".7z", ".rar", ".bz2", ".xz", ".zst", ".lz4", ".br")
MAGIC = [  # (offset, bytes, what it is)
    (0, b"\x1f\x8b", "gzip"), (0, b"PK\x03\x04", "zip"), (0, b"PK\x05\x06", "zip"), (0, b"PAR1", "parquet"),
    (0, b"\x89PNG", "a PNG image"), (0, b"\xff\xd8\xff", "a JPEG image"), (0, b"GIF8", "a GIF image"),
    (0, b"%PDF", "a PDF document"), (0, b"BZh", "a bzip2 archive"), (0, b"\xfd7zXZ\x00", "an xz archive"),
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"), (0, b"Rar!", "a RAR archive"),
    (0, b"\x28\xb5\x2f\xfd", "a zstd archive"), (0, b"ARROW1", "an Arrow file"),
    (0, b"SQLite format 3\x00", "an SQLite database"), (257, b"ustar", "a tar archive"),
    (0, b"\xff\xfe", "UTF-16 text"), (0, b"\xfe\xff", "UTF-16 text"),
]


@dataclass
class DatasetError(Exception):
    errors: list[str] = field(default_factory=list)

    def __str__(self):
        return "; ".join(self.errors)


@dataclass(frozen=True)
class ImportOptions:
    prompt_column: str = "prompt"
    # a column of worked solutions ending in "#### <answer>" (GSM8K): the answer is parsed into 'answer', the full
    # text kept in 'solution' (or, when the column has another name, left in that column)
    gsm8k_column: str = ""
    max_bytes: int = 2 * 1024**3
    max_columns: int = 1000  # columns in one row
    max_field_bytes: int = 4 * 1024**2  # one text value (a cell, or a text inside a list or object)
    max_depth: int = 32  # lists and objects inside each other (a list of messages is 2 deep)
    precise: bool = False  # skip the fast road (pyarrow's readers): the row by row road only
    progress_path: str = ""  # where the rows written so far are noted, for a caller watching from another process


@dataclass
class ImportResult:
    format: str
    columns: list[str]
    column_types: dict[str, str]
    row_count: int
    nbytes: int


class _FastPathStopped(Exception):
    """The vectorised road cannot go on; the Python scan will say why, naming the line or row."""


# --- entry points -----------------------------------------------------------------------------------------------

def import_file(source: Path, *, filename: str, dest: Path, workdir: Path, options: ImportOptions) -> ImportResult:
    """Validate the file ``source`` (named ``filename`` by its uploader) and write its rows to ``dest`` as Parquet.

    ``workdir`` takes decompressed copies; the caller removes it, and removes ``dest`` when this raises."""
    size = source.stat().st_size
    if size > options.max_bytes:
        raise DatasetError([f"{filename} is {size} bytes; the limit is {options.max_bytes}"])
    compression, fmt = _type_from_name(filename)
    if compression == "gzip":
        _expect(source, filename, "gzip", "is not gzip-compressed")
        source = _gunzip(source, workdir / "unpacked", filename, options.max_bytes)
    elif compression == "zip":
        _expect(source, filename, "zip", "is not a zip archive")
        source, fmt = _unzip(source, workdir / "unpacked", filename, options.max_bytes)
    if fmt == "parquet":
        _expect(source, filename, "parquet", "is not a Parquet file")
    else:
        _expect(source, filename, "text", f"is not {FORMAT_NAMES[fmt]}")
        if _is_blank(source):
            raise DatasetError([f"{filename} is empty"])
        problem = _first_utf8_problem(source)
        if problem and fmt == "json":
            raise DatasetError([problem])
        if problem:  # whatever pyarrow would make of it: the row by row road names every line that is not UTF-8
            options = dataclasses.replace(options, precise=True)
    # .gz and .zip were capped while decompressing; Parquet decompresses as it is read, so the sink watches it
    sink = _ParquetSink(dest, compressed_size=size if fmt == "parquet" and not compression else 0,
                        progress_path=options.progress_path)
    READERS[fmt](source, sink, options)
    return sink.finish(fmt)


def import_arrow(batches: Iterator[pa.RecordBatch], schema: pa.Schema, *, dest: Path, options: ImportOptions,
                 fmt: str = "hf") -> ImportResult:
    """Validate Arrow batches (a Hugging Face dataset) and write them to ``dest`` as Parquet; errors name the row."""
    sink = _ParquetSink(dest, progress_path=options.progress_path)
    _convert_batches(batches, schema, sink, options)
    return sink.finish(fmt)


def column_kind(t: pa.DataType) -> str:
    """What a column holds, in the words the pages use: text, integer, number, boolean, messages, list, object..."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "text"
    if pa.types.is_dictionary(t):
        return column_kind(t.value_type)
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_null(t):
        return "empty"
    if _is_list(t):
        v = t.value_type
        if pa.types.is_struct(v) and v.get_field_index("role") >= 0 and v.get_field_index("content") >= 0:
            return "messages"
        return "list"
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return "object"
    if pa.types.is_temporal(t):
        return "date"
    return str(t)


# --- file types, archives, bombs ----------------------------------------------------------------------------------

def _type_from_name(name: str) -> tuple[str, str]:
    """(compression, format) from the file name: ('gzip', 'jsonl') for rows.jsonl.gz; format '' for a zip."""
    lower = name.lower()
    if lower.endswith(".zip"):
        return "zip", ""
    compression = ""
    if lower.endswith(".gz"):
        compression, lower = "gzip", lower[:-3]
    if lower.endswith(REFUSED_ARCHIVES) or lower.endswith((".gz", ".zip")):
        raise DatasetError([f"{name}: archives of this kind are not accepted; upload the .jsonl, .json, .csv or "
                            f".parquet file itself, or one of them gzipped (.gz) or alone in a .zip"])
    for ext, fmt in FORMATS.items():
        if lower.endswith(ext):
            return compression, fmt
    raise DatasetError([f"{name}: unsupported file type; upload .jsonl, .json, .csv or .parquet (optionally .gz, "
                        f"or alone in a .zip)"])


def _sniff(path: Path) -> str:
    """What the first bytes say the file is: 'gzip', 'zip', 'parquet', 'text', or a description."""
    with open(path, "rb") as fh:
        head = fh.read(8192)
    for offset, magic, what in MAGIC:
        if head[offset:offset + len(magic)] == magic:
            return what
    return "binary data" if b"\x00" in head else "text"


def _expect(path: Path, filename: str, kind: str, problem: str) -> None:
    what = _sniff(path)
    if what == kind:
        return
    if what == "UTF-16 text":
        raise DatasetError([f"{filename} is UTF-16 text; save it as UTF-8"])
    looks = {"gzip": "a gzip file", "zip": "a zip archive", "parquet": "a Parquet file"}.get(what, what)
    raise DatasetError([f"{filename} {problem}: it looks like {looks}"])


def _first_utf8_problem(path: Path) -> str | None:
    """Text formats must be UTF-8 throughout: the first bad byte, named by its line and its byte in that line
    (0-based); None when the file is all UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    line, line_start, offset = 1, 0, 0  # offset: bytes of the file before this chunk
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(BLOCK_BYTES)
            pending = len(decoder.getstate()[0])  # the start of a character cut by the last chunk's end
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                bad = offset + exc.start - pending
                before = chunk[:max(exc.start - pending, 0)]
                newlines = before.count(b"\n")
                if newlines:
                    line_start = offset + before.rindex(b"\n") + 1
                return f"line {line + newlines}: not UTF-8 text (byte {bad - line_start})"
            if not chunk:
                return None
            newlines = chunk.count(b"\n")
            if newlines:
                line += newlines
                line_start = offset + chunk.rindex(b"\n") + 1
            offset += len(chunk)


def _is_blank(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(65536)
        return not head.strip(b" \t\r\n\xef\xbb\xbf") and not fh.read(1)


def _copy_capped(src, out, filename: str, max_bytes: int, compressed_size) -> None:
    """Copy a decompressing stream, stopping at the size limit or at a bomb's expansion ratio."""
    total = 0
    while chunk := src.read(1024**2):
        total += len(chunk)
        if total > max_bytes:
            raise DatasetError([f"{filename} decompresses to more than {max_bytes} bytes, the limit"])
        if total > EXPANSION_FREE_BYTES and total > MAX_EXPANSION * max(compressed_size(), 1):
            raise DatasetError([f"{filename} expands more than {MAX_EXPANSION} times when decompressed; "
                                f"it looks like a compression bomb"])
        out.write(chunk)


def _gunzip(source: Path, out_path: Path, filename: str, max_bytes: int) -> Path:
    try:
        with open(source, "rb") as raw, gzip.GzipFile(fileobj=raw) as gz, open(out_path, "wb") as out:
            _copy_capped(gz, out, filename, max_bytes, raw.tell)
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError([f"{filename} is not a valid gzip file ({exc})"]) from None
    return out_path


def _unzip(source: Path, out_path: Path, filename: str, max_bytes: int) -> tuple[Path, str]:
    try:
        with zipfile.ZipFile(source) as archive:
            members = [m for m in archive.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
            if len(members) != 1:
                raise DatasetError([f"{filename} must hold exactly one data file; it holds {len(members)}"])
            member = members[0]
            compression, fmt = _type_from_name(member.filename)
            if compression:
                raise DatasetError([f"{filename}: nested archives are not accepted ({member.filename})"])
            if member.flag_bits & 0x1:
                raise DatasetError([f"{filename}: {member.filename} is encrypted"])
            if member.file_size > max_bytes:
                raise DatasetError([f"{filename}: {member.filename} is {member.file_size} bytes uncompressed; "
                                    f"the limit is {max_bytes}"])
            if member.file_size > EXPANSION_FREE_BYTES and member.file_size > MAX_EXPANSION * member.compress_size:
                raise DatasetError([f"{filename} expands more than {MAX_EXPANSION} times when decompressed; "
                                    f"it looks like a compression bomb"])
            with archive.open(member) as src, open(out_path, "wb") as out:
                # the sizes in the header may lie: count what really comes out
                _copy_capped(src, out, filename, max_bytes, lambda: member.compress_size)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise DatasetError([f"{filename} is not a valid zip archive ({exc})"]) from None
    return out_path, fmt


# --- the Parquet output -------------------------------------------------------------------------------------------

class _ParquetSink:
    """Appends checked batches to the version's Parquet file (one row group each, so a page of rows reads one)."""

    def __init__(self, dest: Path, compressed_size: int = 0, progress_path: str = ""):
        self.dest, self.compressed_size, self.progress_path = dest, compressed_size, progress_path
        self.noted_at = 0.0
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None
        self.rows = self.nbytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if self.writer is None:
            self.schema = batch.schema
            self.writer = pq.ParquetWriter(self.dest, batch.schema, compression="zstd")
        self.writer.write_batch(batch)
        self.rows += batch.num_rows
        self.nbytes += batch.nbytes
        if self.progress_path and time.monotonic() - self.noted_at > 0.5:
            Path(self.progress_path).write_text(str(self.rows))
            self.noted_at = time.monotonic()
        if self.compressed_size and self.nbytes > EXPANSION_FREE_BYTES and \
                self.nbytes > MAX_EXPANSION * self.compressed_size:
            raise DatasetError([f"the data expands more than {MAX_EXPANSION} times its file's size; "
                                f"it looks like a compression bomb"])

    def reset(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.dest.unlink(missing_ok=True)
        self.writer, self.schema, self.rows, self.nbytes = None, None, 0, 0

    def finish(self, fmt: str) -> ImportResult:
        if self.writer is not None:
            self.writer.close()
        if not self.rows:
            raise DatasetError(["the file has no rows"])
        return ImportResult(format=fmt, columns=self.schema.names, row_count=self.rows, nbytes=self.nbytes,
                            column_types={f.name: column_kind(f.type) for f in self.schema})


# --- vectorised checks (the fast road) ----------------------------------------------------------------------------

def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t)


def _is_text(t: pa.DataType) -> bool:
    return column_kind(t) == "text"


def text_ok(arr) -> bool:
    """Every value is non-empty text."""
    if not _is_text(arr.type):
        return False
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if arr.null_count:
        return False
    return pc.all(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(arr)), 0)).as_py() is not False


def messages_ok(arr) -> bool:
    """Every value is a non-empty list of {role, content} messages with a known role and text content."""
    if column_kind(arr.type) != "messages" or arr.null_count:
        return False
    struct = arr.type.value_type
    if not (_is_text(struct.field("role").type) and _is_text(struct.field("content").type)):
        return False
    if len(arr) and pc.min(pc.list_value_length(arr)).as_py() == 0:
        return False
    flat = pc.list_flatten(arr)
    if flat.null_count:
        return False
    role, content = pc.struct_field(flat, "role"), pc.struct_field(flat, "content")
    if content.null_count or role.null_count:
        return False
    return pc.all(pc.is_in(role, value_set=pa.array(ROLES))).as_py() is not False


def prompt_ok(arr) -> bool:
    return text_ok(arr) if _is_text(arr.type) else messages_ok(arr)


def _gsm8k_batch(batch: pa.RecordBatch, column: str) -> pa.RecordBatch:
    names = batch.schema.names
    if column not in names or not _is_text(batch.schema.field(column).type):
        raise _FastPathStopped
    text = batch.column(column)
    answer = pc.utf8_trim_whitespace(pc.struct_field(pc.extract_regex(text, GSM8K_ANSWER), [0]))
    if answer.null_count or (len(answer) and not pc.all(pc.greater(pc.utf8_length(answer), 0)).as_py()):
        raise _FastPathStopped
    arrays, fields = list(batch.columns), list(batch.schema)
    at = names.index(column)
    if column == "answer":
        if "solution" in names:
            raise _FastPathStopped
        arrays[at:at + 1] = [answer, text]
        fields[at:at + 1] = [pa.field("answer", answer.type), pa.field("solution", text.type)]
    else:
        if "answer" in names:
            raise _FastPathStopped
        arrays.insert(at + 1, answer)
        fields.insert(at + 1, pa.field("answer", answer.type))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _type_depth(t: pa.DataType) -> int:
    """How many lists and objects an Arrow type holds inside each other (walked without recursion: a hostile file
    can nest thousands deep)."""
    deepest, stack = 0, [(t, 0)]
    while stack:
        t, depth = stack.pop()
        if pa.types.is_dictionary(t):
            stack.append((t.value_type, depth))
        elif _is_list(t) or pa.types.is_fixed_size_list(t):
            stack.append((t.value_type, depth + 1))
        elif pa.types.is_struct(t):
            stack.extend((f.type, depth + 1) for f in t)
        elif pa.types.is_map(t):
            stack.extend(((t.key_type, depth + 1), (t.item_type, depth + 1)))
        deepest = max(deepest, depth)
    return deepest


def _within_limits(arr, options: ImportOptions, depth: int = 0) -> bool:
    """No text in ``arr`` is larger than max_field_bytes, and no value is nested deeper than max_depth (checked on
    the type first, so the walk below never goes deeper than the limit)."""
    if depth == 0 and _type_depth(arr.type) > options.max_depth:
        return False
    t = arr.type
    if pa.types.is_dictionary(t):
        return _within_limits(arr.dictionary, options, depth)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        longest = pc.max(pc.binary_length(arr)).as_py() if len(arr) else 0
        return (longest or 0) <= options.max_field_bytes
    if _is_list(t) or pa.types.is_struct(t) or pa.types.is_map(t):
        if depth + 1 > options.max_depth:
            return False
        if pa.types.is_struct(t):
            return all(_within_limits(child, options, depth + 1) for child in arr.flatten())
        if pa.types.is_map(t):
            return _within_limits(arr.keys, options, depth + 1) and _within_limits(arr.items, options, depth + 1)
        return _within_limits(arr.flatten(), options, depth + 1)
    return True


def _checked(batch: pa.RecordBatch, options: ImportOptions) -> pa.RecordBatch:
    """The batch as it is stored (GSM8K answers parsed), or _FastPathStopped if any row has a problem."""
    if batch.num_columns > options.max_columns or \
            not all(_within_limits(column, options) for column in batch.columns):
        raise _FastPathStopped  # the row checks name the line and the column
    try:
        if options.gsm8k_column:
            batch = _gsm8k_batch(batch, options.gsm8k_column)
        if options.prompt_column in batch.schema.names and prompt_ok(batch.column(options.prompt_column)):
            return batch
    except pa.ArrowException:  # a type the vectorised checks do not handle: let the row checks judge
        pass
    raise _FastPathStopped


# --- row by row checks (the precise road) -------------------------------------------------------------------------

def _kind(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


KIND_WORDS = {"boolean": "true/false", "number": "a number", "text": "text", "list": "a list", "object": "an object"}


def _kind_words(value) -> str:
    kind = _kind(value)
    return "nothing (null)" if kind is None else KIND_WORDS.get(kind, kind)


def value_problem(value, options: ImportOptions) -> str | None:
    """Why one cell breaks a limit (a text too large, values nested too deeply), or None."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            if len(v) * 4 > options.max_field_bytes:  # cheap first: a text can be this long and still fit
                size = len(v.encode("utf-8", "surrogatepass"))
                if size > options.max_field_bytes:
                    return f"holds a text of {size} bytes; the limit is {options.max_field_bytes}"
        elif isinstance(v, (list, dict)):
            if depth + 1 > options.max_depth:
                return f"is nested more than {options.max_depth} levels deep, the limit"
            stack.extend((child, depth + 1) for child in (v.values() if isinstance(v, dict) else v))
    return None


def prompt_problem(value, column: str) -> str | None:
    """Why ``value`` cannot be a prompt (TRL's standard text, or its conversational list of messages), or None."""
    if isinstance(value, str):
        return None if value.strip() else f"column '{column}' must be non-empty text"
    if value is None:
        return f"column '{column}' must be non-empty text"
    if not isinstance(value, list):
        return f"column '{column}' must be text or a list of {{role, content}} messages, got {_kind_words(value)}"
    if not value:
        return f"column '{column}' is an empty list of messages"
    for i, message in enumerate(value, start=1):
        if not isinstance(message, dict):
            return (f"column '{column}' message {i} must be an object with 'role' and 'content', "
                    f"got {_kind_words(message)}")
        role, content = message.get("role"), message.get("content")
        if role is None:
            return f"column '{column}' message {i} has no 'role'"
        if role not in ROLES:
            return f"column '{column}' message {i} has role {role!r}; expected one of {', '.join(ROLES)}"
        if content is None:
            return f"column '{column}' message {i} has no 'content'"
        if not isinstance(content, str):
            return f"column '{column}' message {i} content must be text, got {_kind_words(content)}"
    return None


class _RowChecker:
    """Checks rows one at a time, remembering each column's kind to catch a column of mixed types."""

    def __init__(self, options: ImportOptions, *, track_kinds: bool = True):
        self.options, self.track_kinds = options, track_kinds
        self.errors: list[str] = []
        self.kinds: dict[str, tuple[str, str]] = {}  # column -> (kind, where first seen)
        self.prompt_seen = False
        self.rows = 0

    @property
    def full(self) -> bool:
        return len(self.errors) >= MAX_ERRORS

    def error(self, where: str, message: str) -> None:
        if not self.full:
            self.errors.append(f"{where}: {message}")

    def check(self, where: str, row: dict) -> dict:
        """The row as it is stored; problems go to self.errors."""
        self.rows += 1
        o = self.options
        if len(row) > o.max_columns:
            self.error(where, f"{len(row)} columns; the limit is {o.max_columns}")
            self.prompt_seen = True  # no other message about a row refused for its width
            return row
        for column, value in row.items():
            problem = value_problem(value, o)
            if problem:
                self.error(where, f"column '{column}' {problem}")
        if o.gsm8k_column:
            row = self._gsm8k(where, row)
        if self.track_kinds:
            for column, value in row.items():
                kind = _kind(value)
                if kind is None:
                    continue
                seen = self.kinds.setdefault(column, (kind, where))
                if seen[0] != kind:
                    self.error(where, f"column '{column}' holds {KIND_WORDS.get(kind, kind)} here but "
                                      f"{KIND_WORDS.get(seen[0], seen[0])} on {seen[1]}")
        if o.prompt_column not in row:
            self.error(where, f"column '{o.prompt_column}' is missing")
        else:
            self.prompt_seen = True
            problem = prompt_problem(row[o.prompt_column], o.prompt_column)
            if problem:
                self.error(where, problem)
        return row

    def _gsm8k(self, where: str, row: dict) -> dict:
        column = self.options.gsm8k_column
        text = row.get(column)
        if not isinstance(text, str):
            self.error(where, f"column '{column}' must be text ending in '#### <answer>', got {_kind_words(text)}")
            return row
        match = re.search(GSM8K_ANSWER, text)
        if not match or not match.group(1).strip():
            self.error(where, f"column '{column}' has no '#### <answer>' line")
            return row
        taken = "solution" if column == "answer" else "answer"
        if taken in row:
            self.error(where, f"column '{taken}' exists already; parsing '#### <answer>' from '{column}' writes it")
            return row
        out = {}
        for key, value in row.items():
            if key == column and column == "answer":
                out["answer"], out["solution"] = match.group(1).strip(), text
            else:
                out[key] = value
                if key == column:
                    out["answer"] = match.group(1).strip()
        return out

    def raise_if_any(self) -> None:
        errors = self.errors
        prompt = self.options.prompt_column
        if self.rows and not self.prompt_seen:
            columns = ", ".join(self.kinds) or "none"
            errors = [f"no row has a column '{prompt}' (columns: {columns}); name the prompt column"] + \
                     [e for e in errors if not e.endswith(f"column '{prompt}' is missing")]
        if errors:
            if len(errors) >= MAX_ERRORS:
                errors = errors + [f"(only the first {MAX_ERRORS} problems are shown)"]
            raise DatasetError(errors)
        if not self.rows:
            raise DatasetError(["the file has no rows"])


# --- readers ------------------------------------------------------------------------------------------------------

Record = tuple[str, "dict | str"]  # (where, row) or (where, problem)


def _scan_and_write(records, sink: _ParquetSink, options: ImportOptions) -> None:
    """The precise road for text formats: check every row in Python, then (no problems) write them in chunks.

    Taken only when the fast road stopped, so mostly to name problems; a clean file gets here when pyarrow cannot
    stream it (a column that starts empty, a column that appears late, a byte-order mark...)."""
    checker = _RowChecker(options)
    schema = None
    for rows, first, last in _chunks(records(), checker):
        if checker.errors:
            if checker.full:
                break
            continue
        try:
            table_schema = _table(rows).schema
            schema = table_schema if schema is None else pa.unify_schemas([schema, table_schema],
                                                                          promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            checker.error(f"{first} to {last}", _arrow_column_problem(rows, exc))
    checker.raise_if_any()
    sink.reset()
    quiet = _RowChecker(options, track_kinds=False)
    for rows, _, _ in _chunks(records(), quiet):
        sink.write(pa.RecordBatch.from_pylist(rows, schema=schema))


def _table(rows: list[dict]) -> pa.Table:
    """Rows to a table with every key any row has (pa.Table.from_pylist takes the first row's keys only)."""
    keys = dict.fromkeys(k for row in rows for k in row)
    return pa.table({k: pa.array([row.get(k) for row in rows]) for k in keys})


def _chunks(records: Iterator[Record], checker: _RowChecker):
    rows, first = [], None
    where = None
    for where, row in records:
        if isinstance(row, str):
            checker.error(where, row)
            continue
        first = first or where
        rows.append(checker.check(where, row))
        if len(rows) >= SLOW_CHUNK_ROWS:
            yield rows, first, where
            rows, first = [], None
        if checker.full:
            break
    if rows:
        yield rows, first, where


def _arrow_column_problem(rows: list[dict], exc: Exception) -> str:
    columns = dict.fromkeys(k for r in rows for k in r)
    for column in columns:
        try:
            pa.array([r.get(column) for r in rows])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as col_exc:
            return f"column '{column}' mixes types inside its lists or objects ({col_exc})"
    return f"the rows cannot be stored ({exc})"


def _no_duplicates(pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen.add(key)
    return dict(pairs)


class _DuplicateKey(Exception):
    pass


_decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def _parse_object(text: str, max_depth: int) -> dict | str:
    try:
        row = _decoder.decode(text)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return f"values are nested more than {max_depth} levels deep, the limit"
    except _DuplicateKey as exc:
        return f"column '{exc.args[0]}' appears twice"
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    return row


def _jsonl_records(path: Path, options: ImportOptions, max_lines: int = 0) -> Iterator[Record]:
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if max_lines and lineno > max_lines:
                return
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield f"line {lineno}", f"not UTF-8 text (byte {exc.start})"
                continue
            yield f"line {lineno}", _parse_object(text, options.max_depth)


def _head_has_problems(path: Path, options: ImportOptions, lines: int = 100) -> bool:
    """Whether the first lines already break a rule: then the row by row road is taken at once (pyarrow's reader is
    never handed a file it could choke on: thousands of columns, values nested thousands deep)."""
    checker = _RowChecker(options, track_kinds=False)
    for where, row in _jsonl_records(path, options, max_lines=lines):
        if isinstance(row, str):
            return True
        checker.check(where, row)
        if checker.errors:
            return True
    return False


def _without_timestamps(t: pa.DataType) -> pa.DataType:
    """pyarrow reads "2020-01-01" as a timestamp; a dataset means the text."""
    if pa.types.is_temporal(t):
        return pa.string()
    if _is_list(t):
        return pa.list_(_without_timestamps(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _without_timestamps(f.type)) for f in t])
    return t


def read_jsonl(path: Path, sink: _ParquetSink, options: ImportOptions) -> None:
    if options.precise or _head_has_problems(path, options):
        _scan_and_write(lambda: _jsonl_records(path, options), sink, options)
        return
    try:
        read = pj.ReadOptions(block_size=BLOCK_BYTES)
        reader = pj.open_json(path, read_options=read)
        if any(_type_depth(f.type) > options.max_depth for f in reader.schema):
            raise _FastPathStopped  # the row checks name the line
        schema = pa.schema([pa.field(f.name, _without_timestamps(f.type)) for f in reader.schema])
        if schema != reader.schema:
            reader = pj.open_json(path, read_options=read, parse_options=pj.ParseOptions(explicit_schema=schema))
        for batch in reader:
            sink.write(_checked(batch, options))
        return
    except (_FastPathStopped, pa.ArrowException, UnicodeDecodeError):
        pass
    sink.reset()
    _scan_and_write(lambda: _jsonl_records(path, options), sink, options)


NEWLINE = "\n"


def _json_array_records(path: Path, max_depth: int) -> Iterator[Record]:
    """Elements of a top-level JSON array, one at a time (the file is never read whole)."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    buf, pos, lines_before, eof, index = "", 0, 0, False, 0
    consumed_bytes = 0

    def more() -> bool:
        nonlocal buf, pos, lines_before, eof, consumed_bytes
        if eof:
            return False
        chunk = fh.read(1024**2)
        eof = not chunk
        try:
            text = decoder.decode(chunk, final=eof)
        except UnicodeDecodeError as exc:
            line = lines_before + buf.count("\n") + chunk.count(b"\n", 0, exc.start) + 1
            raise _Stop(f"line {line}", f"not UTF-8 text (byte {consumed_bytes + exc.start})") from None
        consumed_bytes += len(chunk)
        lines_before += buf.count("\n", 0, pos)
        buf, pos = buf[pos:] + text, 0
        return True

    def line_at(p: int) -> str:
        return f"line {lines_before + buf.count(NEWLINE, 0, p) + 1}"

    def skip_ws() -> None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf) or not more():
                return

    with open(path, "rb") as fh:
        try:
            skip_ws()
            if buf[pos:pos + 1] != "[":
                raise _Stop(line_at(pos), "expected a JSON array of objects, or one object per line")
            pos += 1
            while True:
                skip_ws()
                if buf[pos:pos + 1] == "]":
                    pos += 1
                    skip_ws()
                    if pos < len(buf):
                        raise _Stop(line_at(pos), "unexpected text after the end of the JSON array")
                    return
                if index:
                    if buf[pos:pos + 1] != ",":
                        raise _Stop(line_at(pos), "not valid JSON (expected ',' or ']' between rows)")
                    pos += 1
                    skip_ws()
                index += 1
                while True:
                    try:
                        value, end = _decoder.raw_decode(buf, pos)
                        if end >= len(buf) and not eof and not isinstance(value, dict):
                            raise json.JSONDecodeError("incomplete", buf, end)  # a number may go on
                        break
                    except json.JSONDecodeError as exc:
                        if len(buf) - pos > MAX_JSON_ROW_CHARS or not more():
                            raise _Stop(line_at(exc.pos), f"not valid JSON ({exc.msg})") from None
                    except _DuplicateKey as exc:
                        raise _Stop(f"row {index}", f"column '{exc.args[0]}' appears twice") from None
                    except RecursionError:
                        raise _Stop(f"row {index}", f"values are nested more than {max_depth} levels deep, "
                                                    f"the limit") from None
                pos = end
                if isinstance(value, dict):
                    yield f"row {index}", value
                else:
                    yield f"row {index}", f"expected a JSON object, got {type(value).__name__}"
        except _Stop as stop:
            yield stop.where, stop.problem


class _Stop(Exception):
    def __init__(self, where: str, problem: str):
        super().__init__(problem)
        self.where, self.problem = where, problem


def read_json(path: Path, sink: _ParquetSink, options: ImportOptions) -> None:
    """A JSON array of objects; a .json file holding one object per line is read as JSON lines."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"{"):
        return read_jsonl(path, sink, options)
    _scan_and_write(lambda: _json_array_records(path, options.max_depth), sink, options)


def _csv_header(path: Path, options: ImportOptions) -> list[str]:
    with open(path, "rb") as fh:
        first = fh.readline()
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError([f"line 1: not UTF-8 text (byte {exc.start})"]) from None
    header = next(csv.reader([text]), [])
    if len(header) > options.max_columns:
        raise DatasetError([f"line 1: {len(header)} columns; the limit is {options.max_columns}"])
    errors, seen = [], {}
    for i, name in enumerate(header, start=1):
        if not name.strip():
            errors.append(f"line 1: column {i} has no name")
        elif name in seen:
            errors.append(f"line 1: column '{name}' appears twice (columns {seen[name]} and {i})")
        seen.setdefault(name, i)
    if errors:
        raise DatasetError(errors)
    return header


def _csv_records(path: Path, header: list[str]) -> Iterator[Record]:
    problems: list[tuple[int, str]] = []

    def lines():
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                try:
                    yield raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    problems.append((lineno, f"not UTF-8 text (byte {exc.start})"))
                    yield raw.decode("utf-8", errors="replace")

    reader = csv.reader(lines())
    previous = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            yield f"line {reader.line_num}", f"not valid CSV ({exc})"
            break
        start, previous = previous + 1, reader.line_num
        while problems:
            lineno, problem = problems.pop(0)
            yield f"line {lineno}", problem
        if start == 1 or not fields:
            continue
        if len(fields) != len(header):
            yield f"line {start}", f"expected {len(header)} fields ({', '.join(header)}), got {len(fields)}"
            continue
        yield f"line {start}", dict(zip(header, fields))


def read_csv(path: Path, sink: _ParquetSink, options: ImportOptions) -> None:
    header = _csv_header(path, options)
    if options.precise:
        csv.field_size_limit(2**31 - 1)
        _scan_and_write(lambda: _csv_records(path, header), sink, options)
        return
    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(block_size=BLOCK_BYTES),
            parse_options=pcsv.ParseOptions(newlines_in_values=True),
            # every cell is text, as written: no type guessing, no formulas
            convert_options=pcsv.ConvertOptions(column_types={name: pa.string() for name in header},
                                                strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
        for batch in reader:
            sink.write(_checked(batch, options))
        return
    except (_FastPathStopped, pa.ArrowException):
        pass
    sink.reset()
    csv.field_size_limit(2**31 - 1)  # long prompts are normal; the size limit is the upload's
    _scan_and_write(lambda: _csv_records(path, header), sink, options)


def _schema_problems(schema: pa.Schema, options: ImportOptions) -> list[str]:
    errors, seen = [], set()
    for name in schema.names:
        if name in seen:
            errors.append(f"column '{name}' appears twice")
        seen.add(name)
    if len(schema.names) > options.max_columns:
        errors.append(f"{len(schema.names)} columns; the limit is {options.max_columns}")
    if not errors and options.prompt_column not in schema.names:
        errors.append(f"column '{options.prompt_column}' is missing (columns: {', '.join(schema.names)}); "
                      f"name the prompt column")
    return errors


def _convert_batches(batches: Iterator[pa.RecordBatch], schema: pa.Schema, sink: _ParquetSink,
                     options: ImportOptions) -> None:
    """Arrow sources (Parquet, Hugging Face): check each batch; a batch that fails is checked row by row."""
    problems = _schema_problems(schema, options)
    if problems:
        raise DatasetError(problems)
    checker = _RowChecker(options, track_kinds=False)  # typed sources cannot mix types
    offset = 0
    for batch in batches:
        bad_text = _not_utf8_columns(batch)
        if bad_text:
            for name in bad_text:
                checker.error(f"rows {offset + 1} to {offset + batch.num_rows}", f"column '{name}' holds text that "
                                                                                  f"is not UTF-8")
            checker.rows += batch.num_rows
            offset += batch.num_rows
            if checker.full:
                break
            continue
        try:
            good = _checked(batch, options)
        except _FastPathStopped:
            before = len(checker.errors)
            for i, row in enumerate(batch.to_pylist()):
                checker.check(f"row {offset + i + 1}", row)
            if len(checker.errors) == before:  # a check that only the vectorised road makes: name the rows
                checker.error(f"rows {offset + 1} to {offset + batch.num_rows}",
                              f"column '{options.prompt_column}' has values that cannot be used as prompts")
            if checker.full:
                break
        else:
            checker.rows += batch.num_rows
            if not checker.errors:
                sink.write(good)
        offset += batch.num_rows
    checker.prompt_seen = True
    checker.raise_if_any()


def _not_utf8_columns(batch: pa.RecordBatch) -> list[str]:
    """Parquet may carry any bytes in a text column; pyarrow checks them only when asked."""
    try:
        batch.validate(full=True)
        return []
    except pa.ArrowInvalid:
        bad = []
        for name, column in zip(batch.schema.names, batch.columns):
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:
                bad.append(name)
        return bad or batch.schema.names[:1]


def read_parquet(path: Path, sink: _ParquetSink, options: ImportOptions) -> None:
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError([f"not a valid Parquet file ({exc})"]) from None
    meta = pf.metadata
    decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if decoded > EXPANSION_FREE_BYTES and decoded > MAX_EXPANSION * path.stat().st_size:
        raise DatasetError([f"the Parquet file expands more than {MAX_EXPANSION} times when decompressed; "
                            f"it looks like a compression bomb"])
    if meta.num_rows == 0:
        raise DatasetError(["the file has no rows"])
    per_row = max(decoded // max(meta.num_rows, 1), 1)
    batch_rows = min(max(BLOCK_BYTES * 2 // per_row, 1024), 65536)
    try:
        _convert_batches(pf.iter_batches(batch_size=batch_rows), schema, sink, options)
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError([f"the Parquet file cannot be read ({exc})"]) from None


READERS = {"jsonl": read_jsonl, "json": read_json, "csv": read_csv, "parquet": read_parquet}


# --- Hugging Face datasets ----------------------------------------------------------------------------------------

def hub_offline() -> bool:
    import os

    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE", "").upper()
    return value in {"1", "ON", "YES", "TRUE"} or bool(constants.HF_HUB_OFFLINE)


def load_hf(*, local_path: Path | None = None, hub_id: str = "", config: str = "", split: str = "",
            cache_dir: Path):
    """A ``datasets.Dataset`` from a folder saved with ``save_to_disk``, a data folder, or the hub (online only)."""
    import datasets

    datasets.disable_progress_bars()
    try:
        if local_path is not None:
            saved = (local_path / "dataset_info.json").exists() or (local_path / "dataset_dict.json").exists() \
                or (local_path / "state.json").exists()
            loaded = datasets.load_from_disk(str(local_path)) if saved else \
                datasets.load_dataset(str(local_path), cache_dir=str(cache_dir))
            where = local_path.name
        else:
            if hub_offline():
                raise DatasetError([f"cannot reach the Hugging Face hub for '{hub_id}': this server runs offline "
                                    f"(HF_HUB_OFFLINE=1); import a local copy by path instead"])
            loaded = datasets.load_dataset(hub_id, config or None, split=split or None, cache_dir=str(cache_dir))
            where = hub_id
    except DatasetError:
        raise
    except Exception as exc:  # datasets raises many kinds; all mean "this source cannot be loaded"
        kinds = " ".join(cls.__name__ for cls in type(exc).__mro__)
        if hub_id and any(word in kinds for word in ("Connection", "Timeout", "OfflineModeIsEnabled")):
            raise DatasetError([f"cannot reach the Hugging Face hub for '{hub_id}' ({type(exc).__name__}): is this "
                                f"server offline? Import a local copy by path instead"]) from None
        raise DatasetError([f"cannot load '{hub_id or local_path.name}': {type(exc).__name__}: {exc}"]) from None
    if isinstance(loaded, (datasets.DatasetDict, dict)):
        names = list(loaded)
        chosen = split or ("train" if "train" in names else (names[0] if len(names) == 1 else ""))
        if chosen not in names:
            raise DatasetError([f"'{where}' has splits {', '.join(names)}; choose one"])
        loaded = loaded[chosen]
    return loaded


def hf_batches(ds) -> tuple[Iterator[pa.RecordBatch], pa.Schema]:
    table = ds.with_format("arrow")
    schema = table[:0].schema

    def batches():
        for chunk in table.iter(batch_size=65536):
            yield from chunk.to_batches()

    return batches(), schema


# --- copying an upload to disk ------------------------------------------------------------------------------------

def save_stream(stream, out_path: Path, max_bytes: int) -> Path:
    """Write an uploaded stream to ``out_path`` in chunks, stopping at the size limit."""
    chunks = stream.chunks() if hasattr(stream, "chunks") else iter(lambda: stream.read(1024**2), b"")
    total = 0
    with open(out_path, "wb") as out:
        for chunk in chunks:
            total += len(chunk)
            if total > max_bytes:
                raise DatasetError([f"the file is larger than {max_bytes} bytes, the limit"])
            out.write(chunk)
    return out_path
