"""The checks of values and prompts: vectorised over an Arrow batch (the fast road), and row by row in Python (the
precise road, which names the line or row and the column)."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from runs.datasets.importing.options import MAX_ERRORS, DatasetError, ImportOptions

ROLES = ("system", "developer", "user", "assistant", "tool")
GSM8K_ANSWER = r"####[ \t]*(?P<answer>[^\n]*)"  # the same pattern for RE2 (pyarrow) and Python's re


class FastPathStopped(Exception):
    """The vectorised road cannot go on; the Python scan will say why, naming the line or row."""


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
    if is_list(t):
        v = t.value_type
        if pa.types.is_struct(v) and v.get_field_index("role") >= 0 and v.get_field_index("content") >= 0:
            return "messages"
        return "list"
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return "object"
    if pa.types.is_temporal(t):
        return "date"
    return str(t)


# --- vectorised checks (the fast road) ----------------------------------------------------------------------------


def is_list(t: pa.DataType) -> bool:
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
        raise FastPathStopped
    text = batch.column(column)
    answer = pc.utf8_trim_whitespace(pc.struct_field(pc.extract_regex(text, GSM8K_ANSWER), [0]))
    if answer.null_count or (len(answer) and not pc.all(pc.greater(pc.utf8_length(answer), 0)).as_py()):
        raise FastPathStopped
    arrays, fields = list(batch.columns), list(batch.schema)
    at = names.index(column)
    if column == "answer":
        if "solution" in names:
            raise FastPathStopped
        arrays[at : at + 1] = [answer, text]
        fields[at : at + 1] = [pa.field("answer", answer.type), pa.field("solution", text.type)]
    else:
        if "answer" in names:
            raise FastPathStopped
        arrays.insert(at + 1, answer)
        fields.insert(at + 1, pa.field("answer", answer.type))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def type_depth(t: pa.DataType) -> int:
    """How many lists and objects an Arrow type holds inside each other (walked without recursion: a hostile file
    can nest thousands deep)."""
    deepest, stack = 0, [(t, 0)]
    while stack:
        t, depth = stack.pop()
        if pa.types.is_dictionary(t):
            stack.append((t.value_type, depth))
        elif is_list(t) or pa.types.is_fixed_size_list(t):
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
    if depth == 0 and type_depth(arr.type) > options.max_depth:
        return False
    t = arr.type
    if pa.types.is_dictionary(t):
        return _within_limits(arr.dictionary, options, depth)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        longest = pc.max(pc.binary_length(arr)).as_py() if len(arr) else 0
        return (longest or 0) <= options.max_field_bytes
    if is_list(t) or pa.types.is_struct(t) or pa.types.is_map(t):
        if depth + 1 > options.max_depth:
            return False
        if pa.types.is_struct(t):
            return all(_within_limits(child, options, depth + 1) for child in arr.flatten())
        if pa.types.is_map(t):
            return _within_limits(arr.keys, options, depth + 1) and _within_limits(arr.items, options, depth + 1)
        return _within_limits(arr.flatten(), options, depth + 1)
    return True


def checked(batch: pa.RecordBatch, options: ImportOptions) -> pa.RecordBatch:
    """The batch as it is stored (GSM8K answers parsed), or FastPathStopped if any row has a problem."""
    if batch.num_columns > options.max_columns or not all(_within_limits(column, options) for column in batch.columns):
        raise FastPathStopped  # the row checks name the line and the column
    try:
        if options.gsm8k_column:
            batch = _gsm8k_batch(batch, options.gsm8k_column)
        if options.prompt_column in batch.schema.names and prompt_ok(batch.column(options.prompt_column)):
            return batch
    except pa.ArrowException:  # a type the vectorised checks do not handle: let the row checks judge
        pass
    raise FastPathStopped


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
            return (
                f"column '{column}' message {i} must be an object with 'role' and 'content', got {_kind_words(message)}"
            )
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


class RowChecker:
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
                    self.error(
                        where,
                        f"column '{column}' holds {KIND_WORDS.get(kind, kind)} here but "
                        f"{KIND_WORDS.get(seen[0], seen[0])} on {seen[1]}",
                    )
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
            errors = [f"no row has a column '{prompt}' (columns: {columns}); name the prompt column"] + [
                e for e in errors if not e.endswith(f"column '{prompt}' is missing")
            ]
        if errors:
            if len(errors) >= MAX_ERRORS:
                errors = errors + [f"(only the first {MAX_ERRORS} problems are shown)"]
            raise DatasetError(errors)
        if not self.rows:
            raise DatasetError(["the file has no rows"])
