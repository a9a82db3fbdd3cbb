"""The import endpoint against uploads made from TRL's own completions tables (written by TRL's log_completions in
a real run), mutated by a seeded generator: each is either answered 201 with exactly the completions of the tables
it sent stored, or 400 with nothing stored (no run, no import record, no row). Never a 5xx. A mutation built to break
a table (cut bytes, a column gone or of another type, a step that is not one) must be refused."""

from __future__ import annotations

import io
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from runs.models import Rollout, Run, RunImport
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db

UPLOADS = 24


def write(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


# Mutations of one table, each returning the file's bytes: made wrong for sure.
def cut(table, rng):
    data = write(table)
    return data[: rng.randint(0, len(data) - 1)]


def garbage(table, rng):
    return rng.choice([b"", b"PAR1", b"not parquet at all\n", bytes(rng.randrange(256) for _ in range(300))])


def column_gone(table, rng):
    return write(table.drop([rng.choice(["prompt", "completion", "step"])]))


def text_as_numbers(table, rng):
    name = rng.choice(["prompt", "completion"])
    return write(table.set_column(table.schema.get_field_index(name), name, pa.array(range(len(table)))))


def step_not_a_step(table, rng):
    value = rng.choice([-1, 2**40])
    return write(table.set_column(table.schema.get_field_index("step"), "step", pa.array([value] * len(table))))


WRONG = [cut, garbage, column_gone, text_as_numbers, step_not_a_step]


def test_every_generated_trl_upload_is_imported_whole_or_refused_whole(owner, trl_output):
    from pathlib import Path

    rng = random.Random(46)
    api = api_client(owner)
    tables = {p.name: pq.read_table(p) for p in sorted(Path(trl_output.output_dir, "completions").glob("*.parquet"))}
    refused = accepted = 0
    for number in range(UPLOADS):
        names = rng.sample(sorted(tables), rng.randint(1, len(tables)))
        files = {name: write(tables[name]) for name in names}
        mutation = rng.choice(WRONG) if rng.random() < 0.5 else None
        if mutation:
            name = rng.choice(names)
            files[name] = mutation(tables[name], rng)
        uploads = [SimpleUploadedFile(name, data) for name, data in files.items()]
        runs_before = set(Run.objects.values_list("pk", flat=True))
        answer = api.post("/api/runs/import/upload", {"files": uploads, "num_generations": 4})
        said = getattr(mutation, "__name__", "good")
        assert answer.status_code < 500, (number, said, answer.content[:500])
        if answer.status_code >= 400:
            refused += 1
            assert answer.status_code == 400, (number, said, answer.content[:300])
            assert answer.json()["errors"], (number, said)
            assert set(Run.objects.values_list("pk", flat=True)) == runs_before, (number, said)
            assert not RunImport.objects.exclude(run__in=runs_before).exists()
            assert not Rollout.objects.exclude(run__in=runs_before).exists()
            continue
        accepted += 1
        assert answer.status_code == 201 and mutation is None, (number, said, answer.content[:300])
        got = sorted(Rollout.objects.filter(run=answer.json()["id"]).values_list("step", "completion"))
        sent = sorted(
            (int(step), completion)
            for name in names
            for step, completion in zip(tables[name]["step"].to_pylist(), tables[name]["completion"].to_pylist())
        )
        assert got == sent, (number, said)
    assert refused >= UPLOADS // 5 and accepted >= UPLOADS // 5
