"""The attach API's token shards (PUT /api/attach/runs/<id>/tokens/<step>) against hostile and mistaken clients: a
shard is stored whole as the step's shard and the token view reads it; anything that is not a token shard of that
step of the client's own run is a 4xx naming what is wrong (the column, the row), and nothing is stored."""

from __future__ import annotations

import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.urls import reverse
from grpo_web_attach.tokens import shard_name, shard_schema

from runs.models import Run
from tests.attach.test_attach_api_refusals import lines, send, token_client
from tests.rollouts.token_data import TOKENS, shard_rows

pytestmark = pytest.mark.django_db

G = 4


@pytest.fixture
def attached(owner):
    api = token_client(owner)
    made = api.post(
        "/api/attach/runs",
        {"name": "script", "reward_names": ["accuracy"], "config": {"max_steps": 3, "num_generations": G}},
        content_type="application/json",
    )
    assert made.status_code == 200, made.content
    return api, made.json()


def parquet(table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def shard(step: int = 1, rows: list[dict] | None = None, schema=None) -> bytes:
    """A shard as the client writes it (grpo_web_attach.tokens' schema), of group 0 at ``step``."""
    return parquet(pa.Table.from_pylist(rows or shard_rows(step), schema=schema or shard_schema()))


def put(api, created, step: int, data: bytes, *, zipped=False, key=None, encoding=None):
    headers = {"Content-Encoding": encoding or "gzip"} if zipped or encoding else {}
    return api.put(
        f"/api/attach/runs/{created['id']}/tokens/{step}",
        gzip.compress(data) if zipped else data,
        content_type="application/vnd.apache.parquet",
        headers=headers,
        HTTP_X_RESUME_KEY=key or created["resume_key"],
    )


def stored(created) -> list[str]:
    folder = Run.objects.get(pk=created["id"]).run_dir / "tokens"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("zipped", [False, True])
def test_a_shard_is_stored_whole_once_and_the_token_view_reads_it(attached, owner_client, zipped):
    api, created = attached
    data = shard(1)
    for _ in range(2):  # an acknowledgement lost: sent again, stored once
        answer = put(api, created, 1, data, zipped=zipped)
        assert answer.status_code == 200, answer.content
        assert answer.json() == {"step": 1, "rows": 4, "bytes": len(data)}
    assert stored(created) == [shard_name(1)]
    run = Run.objects.get(pk=created["id"])
    assert (run.run_dir / "tokens" / shard_name(1)).read_bytes() == data
    view = owner_client.get(reverse("run_step_tokens_json", args=[run.pk, 1])).json()
    assert [c["tokens"] for c in view["completions"]] == [t[0] for t in TOKENS]
    assert view["completions"][0]["values"]["old_logprob"] == pytest.approx(TOKENS[0][1])


def test_a_shard_sent_again_takes_the_place_of_the_first(attached):
    api, created = attached
    rows = shard_rows(2)
    assert put(api, created, 2, shard(2, rows)).status_code == 200
    rows[0]["entropy"] = [9.0] * len(rows[0]["tokens"])  # the step trained again after a resume
    assert put(api, created, 2, shard(2, rows)).status_code == 200
    table = pq.read_table(Run.objects.get(pk=created["id"]).run_dir / "tokens" / shard_name(2))
    assert table["entropy"][0].as_py() == [9.0] * len(rows[0]["tokens"])


def _with(column: str, row: int, value) -> list[dict]:
    rows = shard_rows(1)
    rows[row][column] = value
    return rows


def _drop(column: str) -> bytes:
    return parquet(pa.Table.from_pylist(shard_rows(1), schema=shard_schema()).drop_columns([column]))


def _retyped(column: str, type_) -> bytes:
    schema = shard_schema()
    schema = schema.set(schema.get_field_index(column), pa.field(column, type_))
    rows = shard_rows(1)
    if type_ == pa.list_(pa.string()):
        for r in rows:
            r[column] = [str(v) for v in r[column]]
    return parquet(pa.Table.from_pylist(rows, schema=schema))


GOOD = shard(1)
HOSTILE = {
    "not parquet": (b"step,index\n1,0\n", 400, "not a Parquet file"),
    "parquet's magic around garbage": (b"PAR1" + b"\x00\xff" * 50 + b"PAR1", 400, "not a readable Parquet file"),
    "cut short": (GOOD[: len(GOOD) // 2] + b"PAR1", 400, "not a readable Parquet file"),
    "a column missing": (_drop("entropy"), 400, "missing entropy"),
    "a column more": (
        parquet(pa.Table.from_pylist(shard_rows(1), schema=shard_schema()).append_column("x", pa.array([1] * 4))),
        400,
        "not one of them: x",
    ),
    "another table": (parquet(pa.table({"prompt": ["2+2"], "completion": ["4"]})), 400, "missing step, update_step"),
    "doubles for floats": (_retyped("logprob", pa.list_(pa.float64())), 400, "column 'logprob': list<item: float>"),
    "strings for numbers": (_retyped("ratio", pa.list_(pa.string())), 400, "column 'ratio'"),
    "a wide index": (_retyped("index", pa.int64()), 400, "column 'index': int32, not int64"),
    "no rows": (parquet(shard_schema().empty_table()), 400, "holds no rows"),
    "a null index": (shard(1, _with("index", 2, None)), 400, "row 2, column 'index': missing (null)"),
    "a value short": (shard(1, _with("logprob", 1, [])), 400, "row 1, column 'logprob': not one value per token"),
    "a text more": (shard(1, _with("tokens", 3, ["2", "2", "x"])), 400, "row 3, column 'tokens'"),
    "a group not its index's": (shard(1, _with("group", 1, 1)), 400, "row 1, column 'group': 1, not index // 4"),
    "a place not its index's": (shard(1, _with("completion", 0, 3)), 400, "row 0, column 'completion': 3"),
    "a negative index": (shard(1, _with("index", 0, -4)), 400, "row 0, column 'index': -4"),
    "a batch after the update": (shard(1, _with("step", 2, 2)), 400, "row 2, column 'step': 2, not a generation"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_hostile_shard_is_refused_by_name_and_stores_nothing(attached, case):
    api, created = attached
    data, status, expected = HOSTILE[case]
    answer = put(api, created, 1, data)
    assert answer.status_code == status and expected in answer.json()["detail"], answer.content
    assert "nothing was stored" in answer.json()["detail"]
    assert stored(created) == []


def test_a_shard_of_another_step_is_refused(attached):
    api, created = attached
    answer = put(api, created, 2, shard(1))  # computed at step 1, sent as step 2's
    assert answer.status_code == 400
    assert "row 0, column 'update_step': 1, not the optimizer step the shard is sent for (2)" in answer.json()["detail"]
    zero = put(api, created, 0, shard(1))
    assert zero.status_code == 400 and "step: an optimizer step from 1" in zero.json()["detail"]
    assert stored(created) == []


def test_bodies_past_the_limits_and_bad_encodings_are_refused(attached, settings):
    api, created = attached
    assert put(api, created, 1, b"\x1f\x8b\x08\x00garbage", encoding="gzip").status_code == 400
    assert "not valid gzip" in put(api, created, 1, b"plain, said to be gzip", encoding="gzip").json()["detail"]
    assert put(api, created, 1, GOOD, encoding="br").status_code == 415
    settings.GRPO_ATTACH_MAX_SHARD_BYTES = len(GOOD) - 1
    big = put(api, created, 1, GOOD)
    assert big.status_code == 413 and f"larger than {len(GOOD) - 1} bytes" in big.json()["detail"]
    settings.GRPO_ATTACH_MAX_SHARD_BYTES = 100_000
    bomb = put(api, created, 1, b"\x00" * 10_000_000, zipped=True)  # 10 kB gzip'd, past the limit expanded
    assert bomb.status_code == 413 and "expands past 100000 bytes" in bomb.json()["detail"]
    settings.GRPO_ATTACH_MAX_SHARD_BYTES = 64 * 1024**2
    settings.GRPO_ATTACH_MAX_EXPANDED_BYTES = 1000  # the columns as the file declares them decompressed
    decoded = put(api, created, 1, GOOD)
    assert decoded.status_code == 413 and "decompressed, more than 1000" in decoded.json()["detail"]
    assert stored(created) == []


def test_another_users_run_a_wrong_key_and_a_read_token_are_refused(attached, owner, outsider):
    api, created = attached
    assert put(token_client(outsider), created, 1, GOOD).status_code == 404
    assert put(api, created, 1, GOOD, key="not-the-key").status_code == 403
    assert put(token_client(owner, "read"), created, 1, GOOD).status_code == 403
    assert put(token_client(owner, "write"), created, 1, GOOD, key="not-the-key").status_code == 403
    imported = Run.objects.filter(pk=created["id"])
    imported.update(origin=Run.Origin.IMPORTED)  # a run the client did not make: not an attached one
    assert put(api, created, 1, GOOD).status_code == 404
    assert stored(created) == []


def test_a_resume_drops_the_shards_of_the_steps_trained_again(attached):
    api, created = attached
    for step in (1, 2, 3):
        assert put(api, created, step, shard(step)).status_code == 200
    # the script runs again from its checkpoint at step 1: steps 2 and 3 are trained again
    answer = send(api, created, lines({"type": "resume", "step": 1}), 0)
    assert answer.status_code == 200, answer.content
    assert stored(created) == [shard_name(1)]
