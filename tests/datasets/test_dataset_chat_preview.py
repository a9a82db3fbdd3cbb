"""The preview shows prompts as the model will see them: conversational prompts through the model's chat template,
rendered in a sandbox without transformers; every cell escaped."""

import io
import json

import pytest
from django.urls import reverse

from runs.datasets.importing import DatasetError
from runs.datasets.mapping import ChatTemplate, Mapping, render_chat
from runs.datasets.selectors import dataset_preview
from runs.datasets.services import dataset_import

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(owner):
    rows = [{"prompt": [{"role": "user", "content": "What is 2 + 2? <script>x</script>"}], "answer": "4"}]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return dataset_import(owner=owner, name="chat", stream=io.BytesIO(data), source_name="chat.jsonl")


def test_the_tiny_models_chat_template_is_applied_with_a_generation_prompt(chat, tiny_model):
    preview = dataset_preview(chat, Mapping.of(chat), model="tiny")
    assert preview.rows[0]["rendered"] == (
        "<|im_start|>user\nWhat is 2 + 2? <script>x</script><|im_end|>\n<|im_start|>assistant\n"
    )


def test_the_rendering_matches_transformers_apply_chat_template(chat, tiny_model):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"}]
    expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    template = ChatTemplate("t", tokenizer.chat_template, {"eos_token": tokenizer.eos_token})
    assert render_chat(template, messages) == expected


def test_a_model_without_a_chat_template_gets_a_note(chat, tmp_path):
    preview = dataset_preview(chat, Mapping.of(chat), model=str(tmp_path))
    assert preview.rows[0]["rendered"] is None
    assert preview.notes[0].startswith(f"no chat template found for '{tmp_path}'")


def test_a_template_cannot_leave_its_sandbox():
    template = ChatTemplate("evil", "{{ messages.__class__.__mro__[1].__subclasses__() }}", {})
    with pytest.raises(DatasetError, match="the chat template \\(evil\\) fails"):
        render_chat(template, [{"role": "user", "content": "x"}])


def test_the_preview_page_escapes_the_rendered_prompt(owner_client, chat, tiny_model):
    url = reverse("dataset_mapping", args=[chat.dataset.pk, 1])
    response = owner_client.post(
        url,
        {
            "action": "preview",
            "prompt_column": "prompt",
            "prompt_format": "conversational",
            "reward_columns": ["answer"],
            "split": "none",
            "model": "tiny",
        },
    )
    body = response.content.decode()
    assert "&lt;|im_start|&gt;user\nWhat is 2 + 2? &lt;script&gt;x&lt;/script&gt;" in body
    assert "<script>x</script>" not in body
