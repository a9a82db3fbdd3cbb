"""A run's tags and notes: its owner edits them on the run page (and through the API), the page shows them as text,
the dashboard's search finds runs by them; bad input is refused by name with nothing saved; an outsider gets 404."""

import html

import pytest
from django.urls import reverse

from runs.lifecycle.services import NOTES_LENGTH
from tests.api.conftest import api_client
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner, dataset_version):
    return make_run(owner, dataset_version, name="lr sweep 3")


def test_the_owner_saves_tags_and_notes_and_the_page_shows_them_as_text(owner_client, run):
    response = owner_client.post(
        reverse("run_notes", args=[run.pk]),
        {"tags": " baseline, lr=1e-5 ,, Baseline, <b>bold</b>", "notes": "diverged at step 40\r\n<script>x()</script>"},
    )
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.tag_list == ["baseline", "lr=1e-5", "<b>bold</b>"]  # blanks dropped, one of each
    assert run.notes == "diverged at step 40\n<script>x()</script>"
    page = owner_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert '<span class="badge tag" data-tag>&lt;b&gt;bold&lt;/b&gt;</span>' in page
    assert "&lt;script&gt;x()&lt;/script&gt;" in page and "<script>x()" not in page
    assert 'value="baseline, lr=1e-5, &lt;b&gt;bold&lt;/b&gt;"' in page  # the edit form holds them


def test_the_dashboards_search_matches_tags_and_notes(owner, owner_client, run, dataset_version):
    make_run(owner, dataset_version, name="another run")
    owner_client.post(reverse("run_notes", args=[run.pk]), {"tags": "Ablation", "notes": "the KL term exploded"})
    for q in ("ablat", "kl TERM"):
        page = owner_client.get(reverse("dashboard"), {"q": q}).content.decode()
        assert ">lr sweep 3<" in page and ">another run<" not in page, q
    assert '<span class="badge tag">Ablation</span>' in page  # shown beside the run's name


@pytest.mark.parametrize(
    "fields, error",
    [
        ({"tags": ",".join(f"t{i}" for i in range(9))}, "tags: at most 8 tags (got 9)"),
        ({"tags": "ok, " + "x" * 33}, "tags: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…' is longer than 32 characters"),
        ({"tags": "bell\x07"}, "tags: 'bell\\x07' holds a comma or a control character"),
        ({"tags": "\u202egnp.exe"}, "tags: '\\u202egnp.exe' holds a comma or a control character"),
        ({"tags": "fine", "notes": "n" * (NOTES_LENGTH + 1)}, f"notes: at most {NOTES_LENGTH} characters"),
    ],
)
def test_bad_tags_or_notes_are_refused_by_name_and_nothing_is_saved(owner_client, run, fields, error):
    response = owner_client.post(reverse("run_notes", args=[run.pk]), {"tags": "", "notes": "", **fields})
    assert response.status_code == 400
    assert error in html.unescape(response.content.decode())
    run.refresh_from_db()
    assert (run.tags, run.notes) == ("", "")


def test_a_nul_in_the_notes_is_refused_by_name(owner_client, run):
    response = owner_client.post(reverse("run_notes", args=[run.pk]), {"tags": "a", "notes": "x\x00y"})
    assert response.status_code == 400 and "notes: a NUL character is not allowed" in response.content.decode()
    run.refresh_from_db()
    assert run.tags == ""


def test_the_api_shows_and_patches_tags_notes_and_the_pin(owner, run):
    api = api_client(owner)
    assert api.get(f"/api/runs/{run.pk}").json()["tags"] == []
    answer = api.patch(
        f"/api/runs/{run.pk}",
        {"tags": ["sweep", "a"], "notes": "keep", "pinned_metric": "kl"},
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.content
    assert (answer.json()["tags"], answer.json()["notes"], answer.json()["pinned_metric"]) == (
        ["sweep", "a"],
        "keep",
        "kl",
    )
    refused = api.patch(f"/api/runs/{run.pk}", {"tags": ["a,b"], "notes": "changed"}, content_type="application/json")
    assert refused.status_code == 400 and refused.json()["errors"] == [
        "tags: 'a,b' holds a comma or a control character"
    ]
    wrong_type = api.patch(f"/api/runs/{run.pk}", {"tags": "sweep", "notes": 5}, content_type="application/json")
    assert wrong_type.status_code == 422 and "tags" in wrong_type.content.decode()
    run.refresh_from_db()
    assert (run.tag_list, run.notes) == (["sweep", "a"], "keep")
    assert [r["tags"] for r in api.get("/api/runs", {"q": "swee"}).json()] == [["sweep", "a"]]


def test_the_pin_is_saved_and_a_bad_name_refused(owner_client, run):
    answer = owner_client.post(reverse("run_pin", args=[run.pk]), {"metric": "completions/mean_length"})
    assert answer.json() == {"pinned_metric": "completions/mean_length"}
    refused = owner_client.post(reverse("run_pin", args=[run.pk]), {"metric": "m" * 201})
    assert refused.status_code == 400 and list(refused.json()["errors"]) == ["metric"]
    run.refresh_from_db()
    assert run.pinned_metric == "completions/mean_length"


def test_an_outsider_gets_404_and_changes_nothing(outsider, outsider_client, run):
    assert outsider_client.post(reverse("run_notes", args=[run.pk]), {"tags": "mine"}).status_code == 404
    assert outsider_client.post(reverse("run_pin", args=[run.pk]), {"metric": "kl"}).status_code == 404
    patch = api_client(outsider).patch(f"/api/runs/{run.pk}", {"notes": "x"}, content_type="application/json")
    assert patch.status_code == 404
    run.refresh_from_db()
    assert (run.tags, run.notes, run.pinned_metric) == ("", "", "")
