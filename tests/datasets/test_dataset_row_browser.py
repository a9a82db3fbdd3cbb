"""The row browser: pages of 50 rows, a search over the text columns, shareable ?q=&page= URLs."""

import io
import json

import pytest
from django.urls import reverse

from runs.datasets.selectors import dataset_rows
from runs.datasets.services import dataset_import

pytestmark = pytest.mark.django_db


@pytest.fixture
def numbers(owner):
    rows = [{"prompt": f"Row {i}: what is {i} + 1?", "answer": str(i + 1), "n": i} for i in range(120_000)]
    rows[70_001]["prompt"] = "A NEEDLE in row 70002"
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return dataset_import(owner=owner, name="numbers", stream=io.BytesIO(data), source_name="n.jsonl")


def test_a_page_holds_fifty_rows_numbered_from_one(numbers):
    page = dataset_rows(numbers, page=1)
    assert (page.total, page.pages, len(page.rows)) == (120_000, 2400, 50)
    assert page.rows[0] == (1, ["Row 0: what is 0 + 1?", "1", "0"])


def test_a_late_page_reads_the_right_rows(numbers):
    page = dataset_rows(numbers, page=1801)
    assert [n for n, _ in page.rows] == list(range(90_001, 90_051))
    assert page.rows[0][1][2] == "90000"


def test_a_page_past_the_end_shows_the_last_page(numbers):
    page = dataset_rows(numbers, page=99_999)
    assert page.number == 2400 and page.rows[-1][0] == 120_000


def test_search_finds_text_case_insensitively_with_row_numbers(numbers):
    page = dataset_rows(numbers, q="needle")
    assert page.total == 1
    assert page.rows == [(70_002, ["A NEEDLE in row 70002", "70002", "70001"])]


def test_search_results_are_paged(numbers):
    page = dataset_rows(numbers, q="+ 1?", page=3)
    assert page.total == 119_999 and page.pages == 2400
    assert [n for n, _ in page.rows][:2] == [101, 102]


def test_search_looks_inside_messages(owner):
    rows = [
        {"prompt": [{"role": "user", "content": "plain"}]},
        {"prompt": [{"role": "system", "content": "x"}, {"role": "user", "content": "find me"}]},
    ]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    version = dataset_import(owner=owner, name="chat", stream=io.BytesIO(data), source_name="c.jsonl")
    assert [n for n, _ in dataset_rows(version, q="FIND").rows] == [2]


def test_the_page_keeps_the_search_in_its_links(owner_client, numbers):
    url = reverse("dataset_version", args=[numbers.dataset.pk, 1])
    body = owner_client.get(url, {"q": "what is 1", "page": "2"}).content.decode()
    assert "page 2 of" in body
    assert f'href="{url}?q=what+is+1&amp;page=3"' in body


def test_a_search_with_no_match_says_so(owner_client, numbers):
    body = owner_client.get(reverse("dataset_detail", args=[numbers.dataset.pk]), {"q": "zebra"}).content.decode()
    assert "0 rows containing “zebra”" in body


def test_a_page_number_that_is_not_a_number_shows_the_first_page(owner_client, numbers):
    response = owner_client.get(reverse("dataset_detail", args=[numbers.dataset.pk]), {"page": "x"})
    assert response.status_code == 200 and "page 1 of 2400" in response.content.decode()


def test_cells_and_the_search_are_shown_as_text(owner_client, owner):
    data = b'{"prompt": "<img src=x onerror=alert(1)>"}\n'
    version = dataset_import(owner=owner, name="x", stream=io.BytesIO(data), source_name="x.jsonl")
    body = owner_client.get(reverse("dataset_detail", args=[version.dataset.pk]), {"q": "<img"}).content.decode()
    assert "<img" not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
