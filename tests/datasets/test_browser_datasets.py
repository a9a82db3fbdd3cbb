"""In chromium: upload a CSV, map its columns, preview the prompts as the model sees them, save; browse the rows."""

import json

import pytest

from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_upload_map_and_preview_a_dataset(web_server, owner, tiny_model, page, tmp_path):
    upload = tmp_path / "questions.csv"
    upload.write_text('question,answer,level\nWhat is 2 + 2?,4,easy\n"<b>Bold</b> question, with a comma",=1+1,hard\n')
    log_in(page, web_server)

    page.click("text=Upload dataset")
    page.fill("#id_name", "questions")
    page.set_input_files("#id_file", str(upload))
    page.fill("#id_prompt_column", "question")
    page.click("button:text('Upload')")
    page.wait_for_selector("#preview")
    assert page.locator("#preview tbody tr").count() == 2
    assert page.locator("#preview tbody tr").nth(1).inner_text().count("<b>Bold</b>") == 1  # text, not markup
    assert "=1+1" in page.locator("#preview").inner_text()  # a formula cell stays text

    page.click("#edit-mapping")
    page.select_option("#id_prompt_format", "conversational")
    page.fill("#id_system_prompt", "Answer with a number.")
    page.fill("#id_prompt_template", "Question: {question}")
    page.uncheck("#reward-columns input[value=level]")
    page.fill("#id_model", "tiny")
    page.click("button:text('Preview')")
    page.wait_for_selector("#mapping-preview")
    first = page.locator("#mapping-preview .rendered").first.inner_text()
    assert first == (
        "<|im_start|>system\nAnswer with a number.<|im_end|>\n"
        "<|im_start|>user\nQuestion: What is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert page.locator("#mapping-preview .preview-row").count() == 2

    page.click("button:text('Save as a new version')")
    page.wait_for_selector("#mapping-summary")
    assert "Version 2" in page.inner_text("#version-summary")
    summary = page.inner_text("#mapping-summary")
    assert "Question: {question}" in summary and "answer" in summary and "level" not in summary


def test_browse_and_search_rows(web_server, owner, page, tmp_path):
    upload = tmp_path / "many.jsonl"
    upload.write_text("".join(json.dumps({"prompt": f"item {i:03d}", "answer": str(i)}) + "\n" for i in range(120)))
    log_in(page, web_server)
    page.click("text=Upload dataset")
    page.fill("#id_name", "many")
    page.set_input_files("#id_file", str(upload))
    page.click("button:text('Upload')")
    page.wait_for_selector("#preview")
    assert page.locator("#preview tbody tr").count() == 50

    page.click("#pager a[rel=next]")
    page.wait_for_selector("text=page 2 of 3")
    assert page.locator("#preview tbody tr").first.inner_text().startswith("51")

    page.fill("#row-search input[name=q]", "ITEM 11")
    page.click("#row-search button")
    page.wait_for_selector("text=10 rows containing")  # item 110 to item 119
    assert "q=ITEM+11" in page.url
    assert page.locator("#preview tbody tr").count() == 10


def test_upload_a_new_version_from_the_dataset_page(web_server, owner, page, tmp_path):
    first, second = tmp_path / "v1.jsonl", tmp_path / "v2.parquet"
    first.write_text(json.dumps({"prompt": "old question", "answer": "1"}) + "\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompt": ["new question", "another"], "answer": ["2", "3"]}), second)
    log_in(page, web_server)
    page.click("text=Upload dataset")
    page.fill("#id_name", "versions")
    page.set_input_files("#id_file", str(first))
    page.click("button:text('Upload')")
    page.wait_for_selector("#preview")

    page.click("text=Upload a new version")
    page.set_input_files("#id_file", str(second))
    page.click("button:text('Upload')")
    page.wait_for_selector("text=Version 2 · 2 rows")
    assert "new question" in page.inner_text("#preview")
    page.click("#versions a:text('v1')")
    page.wait_for_selector("text=Version 1 · 1 row ·")
    assert "old question" in page.inner_text("#preview")
