"""The mapping: which column is the prompt, what reaches the reward functions, a system prompt and template, the
train/eval split; saved as a new version; written as the training program's JSON lines."""

import io
import json

import pytest
from django.urls import reverse

from runs.datasets.importing import DatasetError
from runs.datasets.mapping import Mapping, render_template, template_fields
from runs.datasets.services import dataset_import, dataset_version_map, version_training_file
from runs.models import DatasetVersion

pytestmark = pytest.mark.django_db

GSM = [
    {
        "question": f"What is {i} + {i}?",
        "answer": str(2 * i),
        "source": "gen",
        "split": "test" if i % 4 == 0 else "train",
    }
    for i in range(40)
]


@pytest.fixture
def questions(owner):
    data = "".join(json.dumps(r) + "\n" for r in GSM).encode()
    return dataset_import(
        owner=owner, name="questions", stream=io.BytesIO(data), source_name="q.jsonl", prompt_column="question"
    )


def _lines(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def _map(version, **fields):
    return dataset_version_map(version=version, mapping=Mapping(**{"prompt_column": "question", **fields}))


def test_saving_a_mapping_creates_a_new_version_and_leaves_the_old_one_as_it_was(questions):
    new = _map(questions, prompt_template="Q: {question}", reward_columns=("answer",))
    questions.refresh_from_db()
    assert (new.number, new.based_on, new.path) == (2, questions, questions.path)
    assert (questions.prompt_template, new.prompt_template) == ("", "Q: {question}")


def test_the_training_file_has_the_prompt_and_only_the_reward_columns(questions, tmp_path):
    version = _map(questions, reward_columns=("answer",))
    rows = _lines(version_training_file(version=version, out=tmp_path / "train.jsonl"))
    assert rows[0] == {"prompt": "What is 0 + 0?", "answer": "0"}
    assert len(rows) == 40


def test_a_template_fills_in_columns_and_keeps_literal_braces(questions, tmp_path):
    version = _map(questions, prompt_template="Solve {question} and put the answer in \\boxed{{}}.")
    rows = _lines(version_training_file(version=version, out=tmp_path / "train.jsonl"))
    assert rows[1]["prompt"] == "Solve What is 1 + 1? and put the answer in \\boxed{}."


def test_a_system_prompt_is_a_system_message_in_conversational_format(questions, tmp_path):
    version = _map(questions, prompt_format="conversational", system_prompt="Think, then answer.")
    rows = _lines(version_training_file(version=version, out=tmp_path / "train.jsonl"))
    assert rows[0]["prompt"] == [
        {"role": "system", "content": "Think, then answer."},
        {"role": "user", "content": "What is 0 + 0?"},
    ]


def test_a_system_prompt_comes_first_in_standard_format(questions, tmp_path):
    version = _map(questions, system_prompt="Be brief.")
    assert (
        _lines(version_training_file(version=version, out=tmp_path / "t.jsonl"))[0]["prompt"]
        == "Be brief.\n\nWhat is 0 + 0?"
    )


def test_a_fraction_split_holds_out_the_same_rows_every_time(questions, tmp_path):
    version = _map(questions, split="fraction", eval_fraction=0.25, split_seed=3)
    again = _map(questions, split="fraction", eval_fraction=0.25, split_seed=3)
    first = _lines(version_training_file(version=version, out=tmp_path / "a.jsonl"))
    assert first == _lines(version_training_file(version=again, out=tmp_path / "b.jsonl"))
    assert version.train_rows == len(first) and version.train_rows + version.eval_rows == 40
    assert 0 < version.eval_rows < 40


def test_a_split_column_trains_on_its_train_rows_only(questions, tmp_path):
    version = _map(questions, split="column", split_column="split", reward_columns=("answer",))
    rows = _lines(version_training_file(version=version, out=tmp_path / "train.jsonl"))
    assert (version.train_rows, version.eval_rows) == (30, 10)
    assert "What is 0 + 0?" not in [r["prompt"] for r in rows] and len(rows) == 30


def test_a_split_column_without_train_rows_is_refused(questions):
    with pytest.raises(DatasetError) as caught:
        _map(questions, split="column", split_column="source")
    assert caught.value.errors == ["split column 'source' has no row with the value 'train'"]


def test_a_template_naming_a_missing_column_is_refused_naming_it(questions):
    with pytest.raises(DatasetError) as caught:
        _map(questions, prompt_template="{problem}")
    assert caught.value.errors == [
        "template: column 'problem' does not exist (columns: question, answer, source, split)"
    ]
    assert DatasetVersion.objects.count() == 1


def test_a_template_column_with_empty_cells_names_the_rows(owner):
    data = b'{"prompt": "a", "hint": "h"}\n{"prompt": "b", "hint": null}\n'
    version = dataset_import(owner=owner, name="d", stream=io.BytesIO(data), source_name="d.jsonl")
    with pytest.raises(DatasetError) as caught:
        _map(version, prompt_template="{prompt} ({hint})")
    assert caught.value.errors == ["row 2: column 'hint' is empty; the template needs it"]


def test_a_template_column_holding_lists_is_refused(owner):
    data = b'{"prompt": "a", "tags": ["x"]}\n'
    version = dataset_import(owner=owner, name="d", stream=io.BytesIO(data), source_name="d.jsonl")
    with pytest.raises(DatasetError) as caught:
        _map(version, prompt_template="{prompt} {tags}")
    assert caught.value.errors == ["template: column 'tags' holds list; a template needs text"]


def test_choosing_a_prompt_column_with_empty_cells_names_the_rows(questions, owner):
    data = b'{"prompt": "a", "other": "x"}\n{"prompt": "b", "other": ""}\n'
    version = dataset_import(owner=owner, name="d", stream=io.BytesIO(data), source_name="d.jsonl")
    with pytest.raises(DatasetError) as caught:
        dataset_version_map(version=version, mapping=Mapping(prompt_column="other"))
    assert caught.value.errors == ["row 2: column 'other' must be non-empty text"]


def test_messages_cannot_be_used_in_the_standard_format(owner):
    data = b'{"prompt": [{"role": "user", "content": "hi"}]}\n'
    version = dataset_import(owner=owner, name="d", stream=io.BytesIO(data), source_name="d.jsonl")
    with pytest.raises(DatasetError) as caught:
        dataset_version_map(version=version, mapping=Mapping(prompt_format="standard"))
    assert caught.value.errors == ["column 'prompt' holds messages; choose the conversational format"]


def test_a_reward_column_may_not_take_a_name_trl_passes_itself(owner):
    data = b'{"question": "a", "prompt": "b", "completions": "c"}\n'
    version = dataset_import(
        owner=owner, name="d", stream=io.BytesIO(data), source_name="d.jsonl", prompt_column="question"
    )
    with pytest.raises(DatasetError) as caught:
        _map(version, reward_columns=("completions",))
    assert caught.value.errors == [
        "reward column 'completions': TRL passes its own 'completions' to reward functions; rename the column"
    ]


def test_new_uploads_send_every_other_column_to_the_rewards_by_default(questions):
    assert questions.reward_columns == ["answer", "source", "split"]


@pytest.mark.parametrize(
    "template, error",
    [
        ("Solve {question", "unmatched '{' at character 7; write {{ for a literal brace"),
        ("Solve {}", "empty field '{}' at character 7; name a column"),
        ("a } b", "unmatched '}' at character 3; write }} for a literal brace"),
    ],
)
def test_a_template_with_a_stray_brace_is_refused(template, error):
    with pytest.raises(ValueError, match=error.replace("{", r"\{").replace("}", r"\}")):
        template_fields(template)


def test_a_template_cannot_reach_into_attributes():
    assert render_template("{question.__class__}", {"question.__class__": "just a column"}) == "just a column"
    with pytest.raises(KeyError):
        render_template("{question.__class__}", {"question": "x"})


def test_the_mapping_page_saves_a_new_version(owner_client, questions):
    url = reverse("dataset_mapping", args=[questions.dataset.pk, 1])
    response = owner_client.post(
        url,
        {
            "action": "save",
            "prompt_column": "question",
            "prompt_format": "standard",
            "prompt_template": "Q: {question}",
            "reward_columns": ["answer"],
            "split": "none",
        },
    )
    assert response.status_code == 302
    new = questions.dataset.versions.first()
    assert (new.number, new.prompt_template, new.reward_columns) == (2, "Q: {question}", ["answer"])


def test_the_mapping_page_previews_without_saving(owner_client, questions):
    url = reverse("dataset_mapping", args=[questions.dataset.pk, 1])
    response = owner_client.post(
        url,
        {
            "action": "preview",
            "prompt_column": "question",
            "prompt_format": "standard",
            "prompt_template": "<Q> {question}",
            "split": "none",
        },
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "&lt;Q&gt; What is 0 + 0?" in body and "<Q>" not in body
    assert questions.dataset.versions.count() == 1


def test_the_mapping_page_shows_errors_and_saves_nothing(owner_client, questions):
    url = reverse("dataset_mapping", args=[questions.dataset.pk, 1])
    response = owner_client.post(
        url,
        {
            "action": "save",
            "prompt_column": "question",
            "prompt_format": "standard",
            "prompt_template": "{nope}",
            "split": "none",
        },
    )
    assert response.status_code == 400
    assert "template: column &#x27;nope&#x27; does not exist" in response.content.decode()
    assert questions.dataset.versions.count() == 1


def test_an_outsider_gets_404_on_the_mapping_page(outsider_client, questions):
    url = reverse("dataset_mapping", args=[questions.dataset.pk, 1])
    assert outsider_client.get(url).status_code == 404
    assert (
        outsider_client.post(
            url, {"action": "save", "prompt_column": "question", "prompt_format": "standard", "split": "none"}
        ).status_code
        == 404
    )


def test_a_preview_naming_a_missing_column_says_which(owner_client, questions):
    url = reverse("dataset_mapping", args=[questions.dataset.pk, 1])
    response = owner_client.post(
        url,
        {
            "action": "preview",
            "prompt_column": "question",
            "prompt_format": "standard",
            "prompt_template": "{nope}",
            "split": "none",
        },
    )
    assert response.status_code == 400
    assert (
        "column &#x27;nope&#x27; does not exist (columns: question, answer, source, split)" in response.content.decode()
    )
