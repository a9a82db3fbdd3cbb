"""An upload error names the line and the column as a person counts them, in an editor: both from 1, in characters
(not bytes: "é" is one column), whatever the format and however long the line (issue 28, item 13)."""

import pytest

pytestmark = pytest.mark.django_db

GOOD_LINE = '{"prompt": "ok"}\n'


def test_a_bad_byte_after_accented_text_is_named_by_its_character_column(refused):
    line = '{"prompt": "éé'.encode() + b'\xe9"}\n'  # two-byte characters before the bad byte: byte 16, column 15
    assert refused(GOOD_LINE.encode() + line, "rows.jsonl") == ["line 2, column 15: not UTF-8 text"]
    assert refused(b"prompt\nok\n" + "éé".encode() + b"\xe9\n", "rows.csv") == ["line 3, column 3: not UTF-8 text"]


def test_a_json_error_after_accented_text_is_named_by_its_character_column(refused):
    assert refused(f'{GOOD_LINE}{{"prompt": "ééé" x}}\n'.encode(), "rows.jsonl") == [
        "line 2, column 18: not valid JSON (Expecting ',' delimiter)"
    ]
    assert refused(f'[{GOOD_LINE.strip()},\n {{"prompt": "ééé" x}}]'.encode(), "rows.json") == [
        "line 2, column 19: not valid JSON (Expecting ',' delimiter)"
    ]


def test_a_json_error_on_a_line_longer_than_one_read_names_its_column(refused):
    """The JSON array reader reads 1 MiB at a time: the column counts the characters of earlier reads too."""
    pad = " " * (3 * 1024**2 // 2)
    content = f'[{pad}{{"prompt": "ok"}}, {{"prompt": x}}]'.encode()
    column = 1 + len(pad) + len('{"prompt": "ok"}, {"prompt": ') + 1
    assert refused(content, "rows.json") == [f"line 1, column {column}: not valid JSON (Expecting value)"]
