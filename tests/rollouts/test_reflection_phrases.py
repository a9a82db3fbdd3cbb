"""The per-run self-reflection phrase list: defaults after R1, whole-word and regex matching at ingest, highlight
spans, validation of edits, and re-tagging of stored rollouts when the list changes (inline, or by a worker)."""

import pytest
from django.urls import reverse

from runs.models import Rollout
from runs.phrases import DEFAULT_PHRASES
from runs.rollouts import services
from runs.rollouts.reflection import clean_phrases, matcher
from tests.conftest import wait_for
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

COMPLETIONS = [
    ("Wait, 2 + 2 = 4. Let me check: yes.", [1.0, 1.0]),
    ("I awaited the answer: 4.", [1.0, 1.0]),
    ("Let me recheck this. It is 5.", [0.0, 1.0]),
    ("Actually, it's 4.", [1.0, 0.0]),
]


def test_the_defaults_follow_the_r1_aha_moment():
    for phrase in ("wait", "let me reconsider", "actually", "let me check", "i made an error", "verify"):
        assert phrase in DEFAULT_PHRASES


@pytest.mark.parametrize(
    "text,found",
    [
        ("Wait, 2 + 2 = 4.", ["wait"]),
        ("I awaited it; waiting is not waiting.", []),
        ("HMM... let me CHECK", ["let me check", "hmm"]),
        ("double-check, then verify!", ["verify", "double-check"]),
        ("I made an error: 5.", ["i made an error"]),
        ("Überlegung: wait — nochmal", ["wait"]),  # non-ASCII text takes the regex path
    ],
)
def test_phrases_match_as_whole_words_in_any_case(text, found):
    assert matcher(tuple(DEFAULT_PHRASES)).find(text) == found


def test_a_regex_entry_matches_as_python_reads_it():
    m = matcher(("/let me re-?check/", "wait"))
    assert m.find("Let me recheck that") == ["/let me re-?check/"]
    assert m.find("let me re-check, wait") == ["/let me re-?check/", "wait"]


def test_spans_are_javascript_string_offsets():
    text = "😀 wait"  # the emoji is two UTF-16 units, one Python character
    assert matcher(("wait",)).spans(text) == [[3, 7]]
    assert matcher(("wait", "/wa/")).spans("wait") == [[0, 4]]  # overlapping matches merge


@pytest.mark.parametrize(
    "lines,message",
    [
        (["/(unclosed/"], "not a regular expression"),
        (["/x*/"], "matches empty text"),
        (["/(a+)+b/"], "repeated group"),
        (["x" * 201], "longer than"),
        ([f"phrase {i}" for i in range(63)], "at most 62 phrases"),
        (["wa\x00it"], r"wa\\x00it: holds a control character"),  # PostgreSQL could not store it
    ],
)
def test_an_edit_that_would_misbehave_is_refused(lines, message):
    with pytest.raises(ValueError, match=message):
        clean_phrases(lines)


def test_an_edit_is_trimmed_lowered_and_deduplicated():
    assert clean_phrases(["  Wait ", "wait", "", "/Let Me/"]) == ["wait", "/Let Me/"]


@pytest.mark.django_db
def test_ingest_tags_with_the_runs_own_list(owner, dataset_version):
    run = make_run(owner, dataset_version, reflection_phrases=["/let me re-?check/", "actually"])
    ingest(run, rollouts_event(1, [("What is 2 + 2?", COMPLETIONS)]))
    tags = list(
        Rollout.objects.filter(run=run).order_by("index").values_list("reflections", "reflective", "reflection_mask")
    )
    assert tags == [([], False, 0), ([], False, 0), (["/let me re-?check/"], True, 1), (["actually"], True, 2)]


@pytest.mark.django_db
def test_editing_the_list_on_the_page_retags_stored_rollouts(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [("What is 2 + 2?", COMPLETIONS)]))
    assert Rollout.objects.get(run=run, index=0).reflections == ["wait", "let me check"]
    response = owner_client.post(reverse("run_reflection", args=[run.pk]), {"phrases": "awaited\n/let me re-?check/"})
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.reflection_phrases == ["awaited", "/let me re-?check/"]
    tags = list(Rollout.objects.filter(run=run).order_by("index").values_list("reflections", "reflection_mask"))
    assert tags == [([], 0), (["awaited"], 1), (["/let me re-?check/"], 2), ([], 0)]
    assert list(Rollout.objects.filter(run=run, reflective=True).order_by("index").values_list("index", flat=True)) == [
        1,
        2,
    ]


@pytest.mark.django_db
def test_a_bad_edit_shows_the_error_and_keeps_the_list(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    response = owner_client.post(reverse("run_reflection", args=[run.pk]), {"phrases": "wait\n/(oops/"})
    assert response.status_code == 400
    assert "not a regular expression" in response.content.decode()
    run.refresh_from_db()
    assert run.reflection_phrases == DEFAULT_PHRASES


@pytest.mark.django_db(transaction=True)
def test_a_large_run_is_retagged_by_a_worker(owner_client, owner, dataset_version, celery_worker, monkeypatch):
    monkeypatch.setattr(services, "RETAG_INLINE_ROWS", 2)
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, [("What is 2 + 2?", COMPLETIONS)]))
    response = owner_client.post(reverse("run_reflection", args=[run.pk]), {"phrases": "awaited"})
    assert response.status_code == 302
    wait_for(
        lambda: (
            Rollout.objects.filter(run=run, reflective=True).count() == 1
            and Rollout.objects.get(run=run, index=1).reflections == ["awaited"]
        ),
        timeout=60,
        what="the worker to re-tag the rollouts",
    )
    assert Rollout.objects.get(run=run, index=0).reflections == []
