"""Each bad input is refused with an error that names the line or row and the column; nothing is saved."""

import gzip
import io
import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.conf import settings

from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import
from runs.models import Dataset, DatasetVersion

pytestmark = pytest.mark.django_db


def _stored_files():
    folder = Path(settings.DATA_DIR) / "datasets"
    return set(folder.iterdir()) if folder.exists() else set()


def _refused(owner, content: bytes, name: str, **kwargs) -> list[str]:
    """The errors for this upload, after checking that nothing at all was saved."""
    before = _stored_files()
    with pytest.raises(DatasetError) as caught:
        dataset_import(owner=owner, name="bad", stream=io.BytesIO(content), source_name=name, **kwargs)
    assert not Dataset.objects.exists() and not DatasetVersion.objects.exists()
    assert _stored_files() == before
    return caught.value.errors


def _jsonl(*rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_a_broken_json_line_is_named(owner):
    errors = _refused(owner, b'{"prompt": "ok"}\n{"prompt": "broken", \n', "rows.jsonl")
    assert errors[0].startswith("line 2, column 22: not valid JSON (")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json"])
def test_nan_and_infinity_are_not_json_and_are_named(owner, constant, name):
    """Python's json and pyarrow's reader both take NaN; JSON has no such number (issue 30, item 10)."""
    rows = [f'{{"prompt": "p{i}", "score": {1.5 if i != 2 else constant}}}' for i in range(1, 4)]
    content = ("\n".join(rows) if name.endswith("l") else "[" + ",".join(rows) + "]").encode()
    errors = _refused(owner, content, name)
    where = "line 2" if name.endswith("l") else "row 2"
    assert errors == [f"{where}: not valid JSON ({constant} is not a JSON number)"]


def test_a_line_that_is_not_utf8_is_named(owner):
    errors = _refused(owner, '{"prompt": "ok"}\n{"prompt": "café"}\n'.encode("latin-1"), "rows.jsonl")
    assert errors == ["line 2, column 16: not UTF-8 text"]


def test_a_csv_line_that_is_not_utf8_is_named(owner):
    errors = _refused(owner, "prompt,answer\nok,1\ncafé,2\n".encode("latin-1"), "rows.csv")
    assert errors == ["line 3, column 4: not UTF-8 text"]


def test_utf16_text_is_refused_with_the_encoding_named(owner):
    errors = _refused(owner, '{"prompt": "ok"}\n'.encode("utf-16"), "rows.jsonl")
    assert errors == ["rows.jsonl is UTF-16 text; save it as UTF-8"]


def test_a_missing_prompt_names_the_line_and_column(owner):
    errors = _refused(owner, _jsonl({"prompt": "ok"}, {"question": "where?"}), "rows.jsonl")
    assert errors == ["line 2: column 'prompt' is missing"]


def test_an_empty_prompt_names_the_line_and_column(owner):
    errors = _refused(owner, _jsonl({"prompt": "ok"}, {"prompt": "ok"}, {"prompt": "  "}), "rows.jsonl")
    assert errors == ["line 3: column 'prompt' must be non-empty text"]


def test_an_empty_csv_prompt_cell_names_the_line(owner):
    errors = _refused(owner, b"prompt,answer\nok,1\n,2\n", "rows.csv")
    assert errors == ["line 3: column 'prompt' must be non-empty text"]


def test_a_null_parquet_prompt_names_the_row(owner):
    errors = _refused(owner, _parquet(pa.table({"prompt": ["ok", None, "ok"]})), "rows.parquet")
    assert errors == ["row 2: column 'prompt' must be non-empty text"]


def test_a_file_without_the_prompt_column_says_which_columns_it_has(owner):
    errors = _refused(owner, _jsonl({"question": "a?", "answer": "1"}, {"question": "b?", "answer": "2"}), "q.jsonl")
    assert errors == ["no row has a column 'prompt' (columns: question, answer); name the prompt column"]


def test_mixed_types_in_a_column_name_both_lines(owner):
    errors = _refused(owner, _jsonl({"prompt": "a", "answer": "4"}, {"prompt": "b", "answer": 5}), "rows.jsonl")
    assert errors == ["line 2: column 'answer' holds a number here but text on line 1"]


def test_a_nested_value_where_the_prompt_text_belongs_is_named(owner):
    errors = _refused(owner, _jsonl({"prompt": {"text": "2 + 2?"}}), "rows.jsonl")
    assert errors == ["line 1: column 'prompt' must be text or a list of {role, content} messages, got an object"]


def test_a_number_where_the_prompt_text_belongs_is_named(owner):
    errors = _refused(owner, _parquet(pa.table({"prompt": [1, 2]})), "rows.parquet")
    assert errors[0] == "row 1: column 'prompt' must be text or a list of {role, content} messages, got a number"


@pytest.mark.parametrize(
    "prompt, problem",
    [
        ([], "column 'prompt' is an empty list of messages"),
        (["hi"], "column 'prompt' message 1 must be an object with 'role' and 'content', got text"),
        ([{"content": "hi"}], "column 'prompt' message 1 has no 'role'"),
        (
            [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}],
            "column 'prompt' message 2 has role 'robot'; expected one of system, developer, user, assistant, tool",
        ),
        ([{"role": "user"}], "column 'prompt' message 1 has no 'content'"),
        ([{"role": "user", "content": ["a", "b"]}], "column 'prompt' message 1 content must be text, got a list"),
    ],
)
def test_malformed_messages_are_named(owner, prompt, problem):
    errors = _refused(
        owner, _jsonl({"prompt": [{"role": "user", "content": "fine"}]}, {"prompt": prompt}), "chat.jsonl"
    )
    assert errors == [f"line 2: {problem}"]


def test_malformed_messages_in_parquet_name_the_row(owner):
    messages = pa.array([[{"role": "user", "content": "ok"}], [{"role": "robot", "content": "x"}]])
    errors = _refused(owner, _parquet(pa.table({"prompt": messages})), "chat.parquet")
    assert errors == [
        "row 2: column 'prompt' message 1 has role 'robot'; expected one of system, developer, user, assistant, tool"
    ]


def test_a_duplicate_csv_header_is_named(owner):
    errors = _refused(owner, b"prompt,answer,answer\na,1,2\n", "rows.csv")
    assert errors == ["line 1: column 'answer' appears twice (columns 2 and 3)"]


def test_a_duplicate_json_key_is_named(owner):
    errors = _refused(owner, b'{"prompt": "a"}\n{"prompt": "b", "prompt": "c"}\n', "rows.jsonl")
    assert errors == ["line 2: column 'prompt' appears twice"]


def test_duplicate_parquet_columns_are_named(owner):
    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["prompt", "prompt"])
    assert _refused(owner, _parquet(table), "rows.parquet") == ["column 'prompt' appears twice"]


def test_a_csv_line_with_too_many_fields_is_named(owner):
    errors = _refused(owner, b"prompt,answer\na,1\nb,2,3\n", "rows.csv")
    assert errors == ["line 3: expected 2 fields (prompt, answer), got 3"]


def test_a_json_array_element_that_is_not_an_object_is_named(owner):
    errors = _refused(owner, b'[{"prompt": "a"}, [1, 2]]', "rows.json")
    assert errors == ["row 2: expected a JSON object, got list"]


def test_broken_json_in_an_array_names_the_line(owner):
    errors = _refused(owner, b'[\n{"prompt": "a"},\n{"prompt": }\n]', "rows.json")
    assert errors[0].startswith("line 3, column 12: not valid JSON")


@pytest.mark.parametrize("content, name", [(b"", "rows.jsonl"), (b"\n \n", "rows.jsonl"), (b"", "rows.csv")])
def test_an_empty_file_is_refused(owner, content, name):
    assert _refused(owner, content, name) == [f"{name} is empty"]


def test_a_csv_with_only_a_header_has_no_rows(owner):
    assert _refused(owner, b"prompt,answer\n", "rows.csv") == ["the file has no rows"]


def test_an_empty_json_array_has_no_rows(owner):
    assert _refused(owner, b"[]", "rows.json") == ["the file has no rows"]


@pytest.mark.parametrize(
    "content, name, error",
    [
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 20, "rows.jsonl", "rows.jsonl is not JSON lines: it looks like a PNG image"),
        (b'{"prompt": "a"}\n', "rows.parquet", "rows.parquet is not a Parquet file: it looks like text"),
        (gzip.compress(b"prompt\na\n"), "rows.csv", "rows.csv is not CSV: it looks like a gzip file"),
        (b"prompt\na\n", "rows.csv.gz", "rows.csv.gz is not gzip-compressed: it looks like text"),
        (b"PAR1" + b"\x00" * 10, "rows.zip", "rows.zip is not a zip archive: it looks like a Parquet file"),
    ],
)
def test_a_file_that_is_not_what_its_extension_says_is_refused(owner, content, name, error):
    assert _refused(owner, content, name) == [error]


def test_a_parquet_file_cut_short_is_refused(owner):
    content = _parquet(pa.table({"prompt": ["a"]}))
    assert _refused(owner, content[:-10], "rows.parquet")[0].startswith("not a valid Parquet file")


@pytest.mark.parametrize("name", ["rows.tar.gz", "rows.7z", "rows.tgz", "rows.jsonl.bz2"])
def test_other_archives_are_refused_with_what_to_upload_instead(owner, name):
    assert "archives of this kind are not accepted" in _refused(owner, b"whatever", name)[0]


def test_an_unknown_extension_is_refused(owner):
    assert "unsupported file type" in _refused(owner, b"prompt\n", "rows.txt")[0]


def test_a_gzip_bomb_is_stopped_by_its_expansion(owner):
    bomb = gzip.compress(b" " * (200 * 1024**2))  # 200 MB of spaces in about 200 KB
    errors = _refused(owner, bomb, "rows.jsonl.gz")
    assert errors == ["rows.jsonl.gz expands more than 100 times when decompressed; it looks like a compression bomb"]


def test_a_gzip_bigger_than_the_limit_once_decompressed_is_stopped(owner, settings):
    settings.GRPO_MAX_UPLOAD_BYTES = 1000
    errors = _refused(owner, gzip.compress(b'{"prompt": "a"}\n' * 100), "rows.jsonl.gz")
    assert errors == ["rows.jsonl.gz decompresses to more than 1000 bytes, the limit"]


def test_a_zip_bomb_is_refused_from_its_header(owner):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("rows.jsonl", b" " * (100 * 1024**2))
    errors = _refused(owner, buffer.getvalue(), "rows.zip")
    assert errors == ["rows.zip expands more than 100 times when decompressed; it looks like a compression bomb"]


def test_a_zip_with_two_files_is_refused(owner):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.jsonl", '{"prompt": "a"}\n')
        archive.writestr("b.jsonl", '{"prompt": "b"}\n')
    assert _refused(owner, buffer.getvalue(), "rows.zip") == ["rows.zip must hold exactly one data file; it holds 2"]


def test_a_nested_archive_is_refused(owner):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("rows.jsonl.gz", gzip.compress(b'{"prompt": "a"}\n'))
    assert _refused(owner, buffer.getvalue(), "rows.zip") == [
        "rows.zip: nested archives are not accepted (rows.jsonl.gz)"
    ]


def test_a_file_over_the_size_limit_is_refused(owner, settings):
    settings.GRPO_MAX_UPLOAD_BYTES = 100
    errors = _refused(owner, _jsonl(*[{"prompt": "a" * 20}] * 10), "rows.jsonl")
    assert errors == ["the file is larger than 100 bytes, the limit"]


def test_a_gsm8k_answer_without_its_marker_is_named(owner):
    errors = _refused(
        owner,
        _jsonl({"question": "q", "answer": "1 + 1 = 2\n#### 2"}, {"question": "q", "answer": "2"}),
        "gsm8k.jsonl",
        prompt_column="question",
        gsm8k_column="answer",
    )
    assert errors == ["line 2: column 'answer' has no '#### <answer>' line"]


def test_only_the_first_twenty_problems_are_listed(owner):
    errors = _refused(owner, b"not json\n" * 50, "rows.jsonl")
    assert len(errors) == 21 and errors[-1] == "(only the first 20 problems are shown)"
    assert errors[19].startswith("line 20, column 1: not valid JSON")
