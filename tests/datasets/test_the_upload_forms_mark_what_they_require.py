"""Both dataset forms (a file; Hugging Face datasets or a local path) say which fields they require, beside the
browser's own check: a Name left blank on the hub form was refused without the form ever saying it was needed."""

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def form(page: str, form_id: str) -> str:
    return page.split(f'id="{form_id}"', 1)[1].split("</form>", 1)[0]


@pytest.mark.parametrize("form_id", ["upload-form", "hub-form"])
def test_the_required_name_is_marked(owner_client, form_id):
    page = owner_client.get(reverse("dataset_upload")).content.decode()
    name = re.search(r"<label>Name (.*?)</label>", form(page, form_id), re.S).group(1)
    assert "(required)" in name and re.search(r'<input[^>]*name="(hf-)?name"[^>]*required', name)
    # nothing optional is marked as required
    assert form(page, form_id).count("(required)") == (2 if form_id == "upload-form" else 1)
