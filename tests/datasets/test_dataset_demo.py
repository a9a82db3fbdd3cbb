"""A fresh install has six demo datasets made locally: letter counting, arithmetic (and the same as chat prompts
that offer the calculator tool, and answered with worked traces), GSM8K-style word problems, and small Python tasks
with tests."""

import re

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from runs.datasets.demo import demo_load
from runs.models import Dataset, DatasetVersion

pytestmark = pytest.mark.django_db


def _rows(name):
    return pq.read_table(Dataset.objects.get(name=name).latest_version.path).to_pylist()


def test_load_demo_creates_the_six_demo_datasets(capsys):
    call_command("load_demo")
    assert sorted(Dataset.objects.values_list("name", flat=True)) == [
        "arithmetic (demo)",
        "arithmetic with a calculator (demo)",
        "letter counting (demo)",
        "python tasks (demo)",
        "word problems (demo)",
        "worked answers (demo)",
    ]


def test_the_calculator_set_is_conversational_and_offers_the_tool():
    demo_load(password="demo")
    version = Dataset.objects.get(name="arithmetic with a calculator (demo)").latest_version
    assert version.prompt_format == "conversational"
    row = _rows("arithmetic with a calculator (demo)")[0]
    question = row["prompt"][0]["content"]
    assert question.endswith("? Use the calculator.")
    a, op, b = re.fullmatch(r"What is (\d+) ([+-]) (\d+)\? Use the calculator\.", question).groups()
    assert row["answer"] == str(int(a) + int(b) if op == "+" else int(a) - int(b))


def test_loading_the_demo_again_changes_nothing():
    demo_load(password="demo")
    before = list(DatasetVersion.objects.values_list("pk", "path"))
    demo_load(password="demo")
    assert list(DatasetVersion.objects.values_list("pk", "path")) == before


def test_letter_counting_answers_are_the_true_counts():
    demo_load(password="demo")
    rows = _rows("letter counting (demo)")
    assert rows[0] == {"prompt": "How many r's are in strawberry?", "answer": "3", "word": "strawberry", "letter": "r"}
    for row in rows:
        letter, word = re.fullmatch(r"How many (\w)'s are in (\w+)\?", row["prompt"]).groups()
        assert (row["answer"], row["word"], row["letter"]) == (str(word.count(letter)), word, letter)


def test_word_problem_answers_are_parsed_from_their_marker_lines():
    demo_load(password="demo")
    version = Dataset.objects.get(name="word problems (demo)").latest_version
    assert (version.prompt_column, version.columns) == ("question", ["question", "answer", "solution"])
    for row in _rows("word problems (demo)"):
        assert row["solution"].endswith(f"#### {row['answer']}") and row["answer"].isdigit()


def test_worked_answers_box_the_true_answer_after_a_trace():
    demo_load(password="demo")
    version = Dataset.objects.get(name="worked answers (demo)").latest_version
    assert version.columns == ["prompt", "completion", "answer"]  # what the R1 template and SFT runs read
    for row in _rows("worked answers (demo)"):
        a, op, b = re.fullmatch(r"What is (\d+) ([+-]) (\d+)\?", row["prompt"]).groups()
        assert row["answer"] == str(int(a) + int(b) if op == "+" else int(a) - int(b))
        assert row["completion"] == f"<think>{a} {op} {b} = {row['answer']}</think> \\boxed{{{row['answer']}}}"


def test_demo_datasets_hold_out_an_eval_split():
    demo_load(password="demo")
    for dataset in Dataset.objects.all():
        version = dataset.latest_version
        assert version.split == "fraction" and 0 < version.eval_rows < version.row_count // 5
        assert version.train_rows + version.eval_rows == version.row_count
