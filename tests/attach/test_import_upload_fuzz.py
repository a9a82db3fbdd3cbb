"""The import endpoint against generated uploads of verl dumps (a seeded generator, a bounded number of them): each
is either answered 201 with exactly the completions it sent stored, a row a line at its step, or answered 400 with
nothing stored (no run, no import record, no row). Never a 5xx. An upload built to be wrong must be refused."""

from __future__ import annotations

import json
import random

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from runs.models import Rollout, Run, RunImport
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db

UPLOADS = 30


def dump_lines(step: int, rng: random.Random) -> list[dict]:
    G = rng.choice([2, 3])
    return [
        {
            "input": f"What is {p}+{step}? " + rng.choice(["", "é ✓", "<b>x</b>", "\\n"]),
            "output": rng.choice(["5", "five", "🙂", "a\tb", "x" * rng.randint(0, 200)]) + f" #{p}.{i}",
            "gts": str(p),
            "score": rng.choice([1.0, 0.0, 0.5, -1, 3]),
            "step": step,
        }
        for p in range(rng.randint(1, 3))
        for i in range(G)
    ]


def encode(lines: list) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


# Mutations of one dump's lines, each returning the file's bytes: made wrong for sure.
def not_json(lines, rng):
    text = encode(lines)
    return text + rng.choice([b"{not json\n", b"[1, 2]\n", b"null\n", b'"text"\n'])


def missing_key(lines, rng):
    del rng.choice(lines)[rng.choice(["input", "output", "score"])]
    return encode(lines)


def bad_score(lines, rng):
    rng.choice(lines)["score"] = rng.choice(["high", [1], {"a": 1}, True])
    return encode(lines)


def bad_text(lines, rng):
    rng.choice(lines)[rng.choice(["input", "output"])] = rng.choice([7, None, ["a"], {"b": 1}])
    return encode(lines)


def bad_step(lines, rng):
    rng.choice(lines)["step"] = rng.choice([-1, "3", 1.5, lines[0]["step"] + 1])
    return encode(lines)


def too_deep(lines, rng):
    depth = rng.choice([1100, 5000])
    text = encode(lines)
    return text.replace(b'"gts": ', b'"gts": ' + b"[" * depth + b"]" * depth + b', "x": ', 1)


WRONG = [not_json, missing_key, bad_score, bad_text, bad_step, too_deep]


def test_every_generated_upload_is_imported_whole_or_refused_whole(owner):
    rng = random.Random(46)
    api = api_client(owner)
    refused = accepted = 0
    for number in range(UPLOADS):
        steps = rng.sample(range(1, 20), rng.randint(1, 3))
        dumps = {step: dump_lines(step, rng) for step in steps}
        files = {step: encode(lines) for step, lines in dumps.items()}
        mutation = rng.choice(WRONG) if rng.random() < 0.5 else None
        if mutation:
            step = rng.choice(steps)
            files[step] = mutation(json.loads(json.dumps(dumps[step])), rng)
        uploads = [SimpleUploadedFile(f"{step}.jsonl", data) for step, data in files.items()]
        runs_before = set(Run.objects.values_list("pk", flat=True))
        answer = api.post("/api/runs/import/upload", {"files": uploads, "source": "verl"})
        name = getattr(mutation, "__name__", "good")
        assert answer.status_code < 500, (number, name, answer.content[:500])
        if answer.status_code >= 400:
            refused += 1
            assert answer.status_code == 400, (number, name, answer.content[:300])
            assert set(Run.objects.values_list("pk", flat=True)) == runs_before, (number, name)
            assert not RunImport.objects.exclude(run__in=runs_before).exists()
            assert not Rollout.objects.exclude(run__in=runs_before).exists()
            continue
        accepted += 1
        assert answer.status_code == 201 and mutation is None, (number, name, answer.content[:300])
        run_id = answer.json()["id"]
        got = sorted(Rollout.objects.filter(run=run_id).values_list("step", "completion"))
        sent = sorted((step, line["output"]) for step, lines in dumps.items() for line in lines)
        assert got == sent, (number, name)
    assert refused >= UPLOADS // 5 and accepted >= UPLOADS // 5
