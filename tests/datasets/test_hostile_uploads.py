"""Files an attacker (or an unlucky user) uploads: each is refused with the exact message, naming the line or row and
the column, and leaves nothing behind. They are read in a child process (runs.datasets.isolated): a file that
crashes the reader, as pyarrow's JSON reader crashes on values nested a hundred thousand deep, ends that child only."""

import gzip
import io
import json
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runs.datasets.services import dataset_import

pytestmark = pytest.mark.django_db

GOOD = [{"prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(150)]  # past the 100-line head check


def jsonl(rows, extra: bytes = b"", after=()) -> bytes:
    return (
        "".join(json.dumps(r) + "\n" for r in rows).encode()
        + extra
        + "".join(json.dumps(r) + "\n" for r in after).encode()
    )


def parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def zipped(name: str, content: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, content)
    return buffer.getvalue()


def nested(depth: int, bracket: str = "[") -> str:
    if bracket == "[":
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def not_utf8_strings() -> pa.Array:
    """A Parquet text column holding Latin-1 bytes (Parquet does not check them; pyarrow does only when asked)."""
    raw = pa.array([b"fine", "caf\xe9".encode("latin-1")], type=pa.binary())
    return raw.view(pa.string())


DEEP = 100_000  # pyarrow's JSON reader crashes (SIGSEGV) on this; Python's json gives up past about 1000
DEEP_LINE = ('{"prompt": "x", "v": ' + nested(DEEP) + "}\n").encode()
LATIN1_LINE = '{"prompt": "café"}\n'.encode("latin-1")
WIDE = {"prompt": "x", **{f"c{i}": i for i in range(100_000)}}
CSV_HEADER_1001 = (",".join(["prompt"] + [f"c{i}" for i in range(1000)]) + "\n").encode()

CASES = {
    # nesting: the reader that would crash never sees the file, or crashes in its child only
    "arrays nested 100k deep on line 1": (
        DEEP_LINE,
        "rows.jsonl",
        ["line 1: values are nested more than 32 levels deep, the limit"],
    ),
    "arrays nested 100k deep after 150 good lines": (
        jsonl(GOOD, DEEP_LINE),
        "rows.jsonl",
        ["line 151: values are nested more than 32 levels deep, the limit"],
    ),
    "objects nested 10k deep after 150 good lines": (
        jsonl(GOOD, ('{"prompt": "x", "v": ' + nested(10_000, "{") + "}\n").encode()),
        "rows.jsonl",
        ["line 151: values are nested more than 32 levels deep, the limit"],
    ),
    "arrays nested 40 deep (Python reads them; over the limit)": (
        jsonl(GOOD, ('{"prompt": "x", "v": ' + nested(40) + "}\n").encode()),
        "rows.jsonl",
        ["line 151: column 'v' is nested more than 32 levels deep, the limit"],
    ),
    "a JSON array with an element nested 10k deep": (
        ("[" + '{"prompt": "x", "v": ' + nested(10_000) + "}]").encode(),
        "rows.json",
        ["row 1: values are nested more than 32 levels deep, the limit"],
    ),
    "nesting in a gzipped file": (
        gzip.compress(jsonl(GOOD, DEEP_LINE)),
        "rows.jsonl.gz",
        ["line 151: values are nested more than 32 levels deep, the limit"],
    ),
    "nesting in a zipped file": (
        zipped("rows.jsonl", jsonl(GOOD, DEEP_LINE)),
        "rows.zip",
        ["line 151: values are nested more than 32 levels deep, the limit"],
    ),
    # encodings
    "Latin-1 after 150 good lines": (jsonl(GOOD, LATIN1_LINE), "rows.jsonl", ["line 151, column 16: not UTF-8 text"]),
    "Latin-1 in a gzipped file": (
        gzip.compress(jsonl(GOOD, LATIN1_LINE)),
        "rows.jsonl.gz",
        ["line 151, column 16: not UTF-8 text"],
    ),
    "Latin-1 in a JSON array": (
        b'[{"prompt": "ok"},\n' + '{"prompt": "café"}]'.encode("latin-1"),
        "rows.json",
        ["line 2, column 16: not UTF-8 text"],
    ),
    "Latin-1 in a CSV cell after 150 lines": (
        b"prompt\n" + b"ok\n" * 150 + "café\n".encode("latin-1"),
        "rows.csv",
        ["line 152, column 4: not UTF-8 text"],
    ),
    "an overlong UTF-8 sequence": (
        jsonl(GOOD, b'{"prompt": "\xc0\xaf"}\n'),
        "rows.jsonl",
        ["line 151, column 13: not UTF-8 text"],
    ),
    "an encoded surrogate": (
        jsonl(GOOD, b'{"prompt": "\xed\xa0\x80"}\n'),
        "rows.jsonl",
        ["line 151, column 13: not UTF-8 text"],
    ),
    "UTF-8 cut in the middle of a character at the end": (
        jsonl(GOOD) + '{"prompt": "é'.encode()[:-1],
        "rows.jsonl",
        ["line 151, column 13: not UTF-8 text"],
    ),
    "Parquet text that is not UTF-8": (
        parquet(pa.table({"prompt": not_utf8_strings()})),
        "rows.parquet",
        ["rows 1 to 2: column 'prompt' holds text that is not UTF-8"],
    ),
    "UTF-16 text": (
        '{"prompt": "ok"}\n'.encode("utf-16"),
        "rows.jsonl",
        ["rows.jsonl is UTF-16 text; save it as UTF-8"],
    ),
    # columns
    "100,000 columns on line 1": (jsonl([WIDE]), "rows.jsonl", ["line 1: 100001 columns; the limit is 1000"]),
    "100,000 columns after 150 good lines": (
        jsonl(GOOD, jsonl([WIDE])),
        "rows.jsonl",
        ["line 151: 100001 columns; the limit is 1000"],
    ),
    "1001 CSV columns": (
        CSV_HEADER_1001 + b"a" + b",1" * 1000 + b"\n",
        "rows.csv",
        ["line 1: 1001 columns; the limit is 1000"],
    ),
    "1001 Parquet columns": (
        parquet(pa.table({"prompt": ["a"], **{f"c{i}": [i] for i in range(1000)}})),
        "rows.parquet",
        ["1001 columns; the limit is 1000"],
    ),
    # truncated and mislabelled
    "a JSON line cut short": (
        jsonl(GOOD) + b'{"prompt": "cut',
        "rows.jsonl",
        ["line 151, column 12: not valid JSON (Unterminated string starting here)"],
    ),
    "a gzip cut short": (
        gzip.compress(jsonl(GOOD))[:-20],
        "rows.jsonl.gz",
        ["rows.jsonl.gz is not a valid gzip file (Compressed file ended before the end-of-stream marker was reached)"],
    ),
    "a zip cut short": (
        zipped("rows.jsonl", jsonl(GOOD))[:-30],
        "rows.zip",
        ["rows.zip is not a valid zip archive (File is not a zip file)"],
    ),
    "a Parquet file named .csv": (
        parquet(pa.table({"prompt": ["a"]})),
        "rows.csv",
        ["rows.csv is not CSV: it looks like a Parquet file"],
    ),
    "a gzip named .jsonl": (
        gzip.compress(jsonl(GOOD)),
        "rows.jsonl",
        ["rows.jsonl is not JSON lines: it looks like a gzip file"],
    ),
    "NUL bytes in a text file": (
        b'{"prompt": "a\x00b"}\n',
        "rows.jsonl",
        ["rows.jsonl is not JSON lines: it looks like binary data"],
    ),
    "a SQLite database named .json": (
        b"SQLite format 3\x00" + b"\x00" * 100,
        "rows.json",
        ["rows.json is not JSON: it looks like an SQLite database"],
    ),
    "a line that is a JSON list": (
        jsonl(GOOD, b"[1, 2]\n"),
        "rows.jsonl",
        ["line 151: expected a JSON object, got list"],
    ),
    "text after a JSON array": (
        b'[{"prompt": "ok"}] {"prompt": "smuggled"}',
        "rows.json",
        ["line 1, column 20: unexpected text after the end of the JSON array"],
    ),
    # path tricks in names
    "a traversal name with an unknown type": (
        b"prompt\n",
        "../../etc/passwd",
        ["passwd: unsupported file type; upload .jsonl, .json, .csv or .parquet (optionally .gz, or alone in a .zip)"],
    ),
    "a zip member with a traversal name and a bomb inside": (
        zipped("../../../tmp/evil.jsonl", b" " * (100 * 1024**2)),
        "rows.zip",
        ["rows.zip expands more than 100 times when decompressed; it looks like a compression bomb"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_file_is_refused_with_its_message_and_leaves_nothing(refused, case):
    content, name, errors = CASES[case]
    assert refused(content, name) == errors


@pytest.mark.parametrize("size, column", [(2000, "prompt"), (2000, "answer")])
def test_a_text_over_the_field_limit_names_the_line_and_column(refused, settings, size, column):
    settings.GRPO_MAX_FIELD_BYTES = 1024
    row = {"prompt": "ok", "answer": "4", column: "é" * (size // 2)}
    assert refused(jsonl(GOOD[:3], after=[row]), "rows.jsonl") == [
        f"line 4: column '{column}' holds a text of {size} bytes; the limit is 1024"
    ]


def test_a_text_over_the_field_limit_inside_messages_is_named(refused, settings):
    settings.GRPO_MAX_FIELD_BYTES = 1024
    chat = [{"prompt": [{"role": "user", "content": "x" * 5000}]}]
    assert refused(jsonl(chat), "chat.jsonl") == [
        "line 1: column 'prompt' holds a text of 5000 bytes; the limit is 1024"
    ]


def test_a_parquet_text_over_the_field_limit_names_the_row(refused, settings):
    settings.GRPO_MAX_FIELD_BYTES = 1024
    table = pa.table({"prompt": ["ok", "y" * 3000]})
    assert refused(parquet(table), "rows.parquet") == [
        "row 2: column 'prompt' holds a text of 3000 bytes; the limit is 1024"
    ]


def test_a_csv_cell_over_the_field_limit_names_the_line(refused, settings):
    settings.GRPO_MAX_FIELD_BYTES = 1024
    assert refused(b"prompt\nok\n" + b"z" * 4000 + b"\n", "rows.csv") == [
        "line 3: column 'prompt' holds a text of 4000 bytes; the limit is 1024"
    ]


def test_a_reader_that_runs_out_of_memory_is_reported_and_leaves_nothing(refused, settings):
    settings.GRPO_IMPORT_MEMORY_BYTES = 300 * 1024**2  # less than the readers need to start
    errors = refused(jsonl(GOOD), "rows.jsonl")
    assert len(errors) == 1 and errors[0].startswith("rows.jsonl ")
    assert "memory" in errors[0] or "signal" in errors[0]


def test_a_name_with_path_parts_is_stored_as_its_last_part(owner):
    version = dataset_import(
        owner=owner, name="tricky", stream=io.BytesIO(jsonl(GOOD[:2])), source_name="../../../etc/rows.jsonl"
    )
    assert version.source_name == "rows.jsonl"
