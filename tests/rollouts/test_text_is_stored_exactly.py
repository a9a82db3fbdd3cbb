"""A completion or prompt holding NUL (which PostgreSQL text cannot store) or the sign that stands for it (U+2400) is
read back exactly as the trainer wrote it: through the API, the JSON lines export and the Parquet export, on SQLite
and on PostgreSQL alike. Ingested as the supervisor ingests: from the run's event log."""

import io
import json

import pyarrow.parquet as pq
import pytest
from django.test import Client

from runs.accounts.services import token_create
from runs.models import Rollout
from runs.paths import event_log_path
from runs.rollouts.ingest import ingest_log
from tests.rollouts.inspect_data import make_run, rollouts_event
from tests.rollouts.test_rollout_exports import content

pytestmark = pytest.mark.django_db

PROMPT = "Echo this:\x00 back"
COMPLETIONS = [
    "before\x00after",  # what TRL's completions table held and the store changed
    "the sign \u2400 itself, then NUL \x00, then both \u2400\x00\u2400",
    "a sign then a selector: \u2400\ufe00 and \u2400\ufe01",  # what the escape writes, sent as text
    "plain",
]


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version, name="nul")
    run.run_dir.mkdir(parents=True, exist_ok=True)
    event = rollouts_event(1, [(PROMPT, [(c, [1.0, 0.0]) for c in COMPLETIONS])])
    event_log_path(run).write_text(json.dumps(event) + "\n")  # json writes NUL as \u0000, as the trainer does
    ingest_log(run, event_log_path(run))
    return run


def _api(owner) -> Client:
    _, raw = token_create(owner=owner, name="read", scope="read")
    return Client(headers={"Authorization": f"Bearer {raw}"})


def test_a_nul_bearing_completion_reads_back_exactly_through_the_api_and_the_exports(owner, run):
    assert Rollout.objects.filter(run=run).count() == len(COMPLETIONS)
    api = _api(owner)

    page = api.get(f"/api/runs/{run.pk}/rollouts")
    assert page.status_code == 200, page.content
    rows = sorted(page.json()["rows"], key=lambda r: r["index"])
    assert [r["completion"] for r in rows] == COMPLETIONS
    assert {r["prompt"] for r in rows} == {PROMPT}

    jsonl = api.get(f"/api/runs/{run.pk}/rollouts/export", {"format": "jsonl"})
    assert jsonl.status_code == 200
    lines = [json.loads(line) for line in content(jsonl).decode().splitlines()]
    assert sorted((r["index"], r["prompt"], r["completion"]) for r in lines) == [
        (i, PROMPT, c) for i, c in enumerate(COMPLETIONS)
    ]

    parquet = api.get(f"/api/runs/{run.pk}/rollouts/export", {"format": "parquet"})
    assert parquet.status_code == 200
    table = pq.read_table(io.BytesIO(content(parquet))).to_pylist()
    assert sorted((r["index"], r["prompt"], r["completion"]) for r in table) == [
        (i, PROMPT, c) for i, c in enumerate(COMPLETIONS)
    ]


def test_a_search_and_a_lookup_by_the_exact_text_find_it(run):
    assert Rollout.objects.get(run=run, completion=COMPLETIONS[0]).index == 0
    assert Rollout.objects.filter(run=run, prompt=PROMPT).count() == len(COMPLETIONS)


# JSON columns of model output and user data: a dataset row's columns (keys too), a conversational completion's
# messages, a run's config and provenance
COLUMNS = {"answer": "4\x002", "note\x00key": ["\u2400", {"deep": "a\x00\u2400\ufe00b"}], "n": 3}
MESSAGES = [{"role": "assistant", "content": "think\x00 then \u2400 answer"}]


def test_json_columns_read_back_exactly(owner, dataset_version):
    run = make_run(owner, dataset_version, name="nul json")
    run.config = {**run.config, "system_prompt": "be brief\x00", "\u2400key": 1}
    run.provenance = {"host": "gpu\x00node"}
    run.save()
    run.run_dir.mkdir(parents=True, exist_ok=True)
    event = rollouts_event(1, [(PROMPT, [(c, [1.0, 0.0]) for c in COMPLETIONS[:2]])])
    event["rows"][0]["columns"] = COLUMNS
    event["rows"][1]["completion"] = MESSAGES
    event_log_path(run).write_text(json.dumps(event) + "\n")
    ingest_log(run, event_log_path(run))

    first, second = Rollout.objects.filter(run=run).order_by("index")
    assert first.columns == COLUMNS
    assert second.messages == MESSAGES
    assert Rollout.objects.filter(run=run, columns__n=3).get().index == 0  # a lookup on plain text still matches
    run.refresh_from_db()
    assert (run.config["system_prompt"], run.config["\u2400key"]) == ("be brief\x00", 1)
    assert run.provenance == {"host": "gpu\x00node"}

    rows = sorted(_api(owner).get(f"/api/runs/{run.pk}/rollouts").json()["rows"], key=lambda r: r["index"])
    assert rows[0]["columns"] == COLUMNS
