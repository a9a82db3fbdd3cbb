"""Every format a GRPO user brings is stored as the same rows: JSON lines, JSON, CSV, Parquet, gzipped or zipped."""

import gzip
import io
import json
import zipfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from runs.datasets.services import dataset_import

pytestmark = pytest.mark.django_db

ROWS = [{"prompt": "What is 2 + 2?", "answer": "4"}, {"prompt": "Spell 'cat'.", "answer": "c-a-t"}]


def _import(owner, content: bytes, name: str, **kwargs):
    return dataset_import(owner=owner, name="d", stream=io.BytesIO(content), source_name=name, **kwargs)


def _rows(version):
    return pq.read_table(version.path).to_pylist()


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_json_lines_are_stored_as_parquet_rows(owner):
    version = _import(owner, _jsonl(ROWS), "rows.jsonl")
    assert version.path.endswith(".parquet")
    assert (version.source_format, version.row_count, version.columns) == ("jsonl", 2, ["prompt", "answer"])
    assert _rows(version) == ROWS


def test_a_json_array_is_read_row_by_row(owner):
    version = _import(owner, json.dumps(ROWS, indent=2).encode(), "rows.json")
    assert version.source_format == "json"
    assert _rows(version) == ROWS


def test_a_json_file_with_one_object_per_line_is_read_as_json_lines(owner):
    assert _rows(_import(owner, _jsonl(ROWS), "rows.json")) == ROWS


def test_csv_cells_are_kept_as_text_including_numbers(owner):
    version = _import(owner, b"prompt,answer\nWhat is 2 + 2?,4\n", "rows.csv")
    assert _rows(version) == [{"prompt": "What is 2 + 2?", "answer": "4"}]
    assert version.column_types == {"prompt": "text", "answer": "text"}


def test_csv_formula_cells_are_kept_as_text_and_never_evaluated(owner):
    content = b'prompt,answer\n=1+1,"=HYPERLINK(""http://x"")"\n+SUM(A1),@cmd\n-2+3,=2\n'
    assert _rows(_import(owner, content, "rows.csv")) == [
        {"prompt": "=1+1", "answer": '=HYPERLINK("http://x")'},
        {"prompt": "+SUM(A1)", "answer": "@cmd"},
        {"prompt": "-2+3", "answer": "=2"},
    ]


def test_csv_quoted_newlines_and_a_byte_order_mark_are_understood(owner):
    content = '\ufeffprompt,answer\n"line one\nline two",2\n'.encode()
    assert _rows(_import(owner, content, "rows.csv")) == [{"prompt": "line one\nline two", "answer": "2"}]


def test_parquet_keeps_its_types(owner):
    table = pa.table({"prompt": ["a?", "b?"], "answer": [1, 2], "weight": [0.5, 1.5]})
    version = _import(owner, _parquet(table), "rows.parquet")
    assert version.column_types == {"prompt": "text", "answer": "integer", "weight": "number"}
    assert _rows(version) == table.to_pylist()


def test_a_gzipped_file_is_decompressed_while_reading(owner):
    assert _rows(_import(owner, gzip.compress(_jsonl(ROWS)), "rows.jsonl.gz")) == ROWS


def test_a_zip_holding_one_data_file_is_read(owner):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("inner/rows.csv", "prompt,answer\nWhat is 2 + 2?,4\n")
    version = _import(owner, buffer.getvalue(), "upload.zip")
    assert (version.source_format, _rows(version)) == ("csv", [{"prompt": "What is 2 + 2?", "answer": "4"}])


def test_conversational_prompts_are_recognised_as_messages(owner):
    rows = [
        {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"}], "answer": "4"}
    ]
    version = _import(owner, _jsonl(rows), "chat.jsonl")
    assert version.column_types["prompt"] == "messages"
    assert version.prompt_format == "conversational"
    assert _rows(version) == rows


def test_text_that_looks_like_a_date_stays_text(owner):
    rows = [{"prompt": "When?", "answer": "2020-01-01"}]
    version = _import(owner, _jsonl(rows), "dates.jsonl")
    assert _rows(version) == rows


@pytest.fixture
def small_blocks(monkeypatch):
    """pyarrow infers a JSON file's types from its first block: small blocks make a late change cross one."""
    from runs.datasets.importing import jsonl, scan

    monkeypatch.setattr(jsonl, "BLOCK_BYTES", 1024)
    monkeypatch.setattr(scan, "SLOW_CHUNK_ROWS", 100)


def test_a_column_that_starts_empty_or_appears_late_is_kept(owner, small_blocks):
    rows = [{"prompt": f"q{i}", "hint": None} for i in range(250)]
    rows[150] = {"prompt": "late", "hint": "a hint", "extra": 7}
    version = _import(owner, _jsonl(rows), "late.jsonl")
    stored = _rows(version)
    assert version.row_count == 250 and version.columns == ["prompt", "hint", "extra"]
    assert stored[150] == {"prompt": "late", "hint": "a hint", "extra": 7}
    assert stored[0] == {"prompt": "q0", "hint": None, "extra": None}


def test_integers_and_decimals_in_one_column_are_numbers(owner, small_blocks):
    rows = [{"prompt": "a", "score": 1}] * 200 + [{"prompt": "b", "score": 2.5}]
    version = _import(owner, _jsonl(rows), "scores.jsonl")
    assert version.column_types["score"] == "number"
    assert _rows(version)[-1]["score"] == 2.5


def test_a_byte_order_mark_and_blank_lines_are_fine(owner, small_blocks):
    content = b"\xef\xbb\xbf" + _jsonl(ROWS[:1]) + b"\n\n" + _jsonl(ROWS[1:])
    assert _rows(_import(owner, content, "bom.jsonl")) == ROWS


def test_a_prompt_column_of_another_name_can_be_chosen_at_upload(owner):
    version = _import(owner, _jsonl([{"question": "2 + 2?", "answer": "4"}]), "q.jsonl", prompt_column="question")
    assert (version.prompt_column, version.reward_columns) == ("question", ["answer"])


def test_gsm8k_answers_are_parsed_into_an_answer_column_keeping_the_solution(owner):
    rows = [
        {"question": "Tom has 2 apples and buys 3. How many?", "answer": "2 + 3 = 5\n#### 5"},
        {"question": "Half of 10?", "answer": "10 / 2 = 5\n####  5 \n"},
    ]
    version = _import(owner, _jsonl(rows), "gsm8k.jsonl", prompt_column="question", gsm8k_column="answer")
    assert version.columns == ["question", "answer", "solution"]
    stored = _rows(version)
    assert [r["answer"] for r in stored] == ["5", "5"]
    assert stored[0]["solution"] == "2 + 3 = 5\n#### 5"
