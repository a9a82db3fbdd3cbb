"""Exports with the browser's filters (JSON lines, Parquet) and rejection sampling into a new SFT dataset that the
dashboard lists and a run can train on."""

import io
import json

import pyarrow.parquet as pq
import pytest
from django.urls import reverse

from runs.models import Dataset
from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db

GOOD = "<think>2 + 2 = 4</think> The answer is $\\boxed{4}$."


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="source run")
    ingest(
        run,
        rollouts_event(
            1,
            [
                ("What is 2 + 2?", [(GOOD, [1.0, 1.0]), ("5", [0.0, 1.0]), ("22", [0.0, 0.0]), (GOOD, [1.0, 1.0])]),
                ("What is 3 + 3?", [("6", [1.0, 0.0]), ("7", [0.0, 0.0]), ("6", [1.0, 0.0]), ("Wait, 6", [1.0, 0.5])]),
            ],
        ),
    )
    ingest(run, rollouts_event(2, [("What is 2 + 2?", [("4", [1.0, 1.0])] * 4)]))
    return run


def content(response) -> bytes:
    """The streamed body (served to ASGI as an async iterator; the test client reads it synchronously)."""
    assert response.status_code == 200 and response.streaming
    with pytest.warns(Warning, match="consume asynchronous iterators"):
        return b"".join(response)


def test_jsonl_export_holds_the_filtered_rows_in_the_browsers_order(owner_client, run):
    url = reverse("run_rollouts_jsonl", args=[run.pk]) + "?reward_min=1.0&step_max=1&sort=step_asc"
    response = owner_client.get(url)
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-rollouts.jsonl"'
    rows = [json.loads(line) for line in content(response).decode().splitlines()]
    assert [(r["step"], r["index"]) for r in rows] == [(1, 0), (1, 1), (1, 3), (1, 4), (1, 6), (1, 7)]
    assert rows[0]["rewards"] == {"accuracy": 1.0, "digit_ratio": 1.0}
    assert rows[0]["completion"] == GOOD and rows[0]["columns"] == {"answer": "4"}
    assert rows[-1]["reflections"] == ["wait"]


def test_parquet_export_holds_the_same_rows(owner_client, run):
    url = reverse("run_rollouts_parquet", args=[run.pk]) + "?zero_std=yes"
    table = pq.read_table(io.BytesIO(content(owner_client.get(url))))
    assert table.num_rows == 4
    rows = table.to_pylist()
    assert {r["step"] for r in rows} == {2} and all(r["zero_std"] for r in rows)
    assert rows[0]["rewards"] == {"accuracy": 1.0, "digit_ratio": 1.0}
    assert json.loads(rows[0]["columns"]) == {"answer": "4"}


def test_an_export_with_no_matches_is_empty_but_valid(owner_client, run):
    url = reverse("run_rollouts_parquet", args=[run.pk]) + "?phrase=no+such+text"
    assert pq.read_table(io.BytesIO(content(owner_client.get(url)))).num_rows == 0
    assert content(owner_client.get(reverse("run_rollouts_jsonl", args=[run.pk]) + "?phrase=no+such+text")) == b""


def test_rejection_sampling_saves_an_sft_dataset_listed_on_the_dashboard(owner_client, run):
    url = reverse("run_rollouts_sft", args=[run.pk]) + "?step_max=1"
    response = owner_client.post(url, {"threshold": "1.5", "name": "sft from the source run"})
    dataset = Dataset.objects.get(name="sft from the source run")
    version = dataset.latest_version
    assert response.status_code == 302 and response["Location"] == version.get_absolute_url()
    # reward >= 1.5 at step 1: GOOD twice (one kept: same prompt and completion) and "Wait, 6"
    assert version.row_count == 2
    assert version.columns == ["prompt", "completion"]
    assert version.prompt_column == "prompt" and version.prompt_format == "standard"
    assert version.reward_columns == []
    rows = pq.read_table(version.path).to_pylist()
    assert rows == [
        {"prompt": "What is 2 + 2?", "completion": GOOD},
        {"prompt": "What is 3 + 3?", "completion": "Wait, 6"},
    ]
    assert "sft from the source run" in owner_client.get(reverse("dashboard")).content.decode()


def test_rejection_sampling_with_nothing_above_the_threshold_saves_nothing(owner_client, run):
    response = owner_client.post(reverse("run_rollouts_sft", args=[run.pk]), {"threshold": "5"}, follow=True)
    assert "no completion of this run has a reward of at least 5" in response.content.decode()
    assert not Dataset.objects.filter(name__contains="SFT").exists()
