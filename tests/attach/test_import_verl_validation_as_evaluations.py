"""verl's validation dumps (RayPPOTrainer._validate into trainer.validation_data_dir, tests/attach/conftest.py)
imported as the run's periodic evaluations at their steps: beside the rollout dumps, named by validation_path, or
alone (a run of its evaluations). The figures the API and the pages show are verl's own validation metrics
(val-core acc/mean@n, the mean reward) and the means of the scores in the files verl wrote."""

import json
import os
import shutil
import time

import numpy as np
import pytest
from django.urls import reverse

from runs.attach.importers.verl import convert
from runs.attach.importing import run_import, run_import_poll
from runs.models import EvalSample, Evaluation, Rollout, Run, RunImport
from tests.api.conftest import api_client
from tests.attach.conftest import VAL_ANSWERS, VAL_N, VAL_ROWS

pytestmark = pytest.mark.django_db

STEPS = sorted(VAL_ANSWERS)


def _lines(folder, step) -> list[dict]:
    return [json.loads(line) for line in (folder / f"{step}.jsonl").read_text().splitlines()]


def _file_means(folder, step) -> tuple[float, float]:
    """The share of acc and the mean score of one validation, from the file verl wrote."""
    lines = _lines(folder, step)
    return float(np.mean([line["acc"] for line in lines])), float(np.mean([line["score"] for line in lines]))


@pytest.fixture
def root(settings, tmp_path, verl_dumps, verl_validation):
    """An import folder holding a verl run's output: rollout_data/ (steps 1, 2) and validation_data/ (0, 2, 4)."""
    root = tmp_path / "imports"
    shutil.copytree(verl_dumps, root / "verl-run" / "rollout_data")
    shutil.copytree(verl_validation[0], root / "verl-run" / "validation_data")
    settings.GRPO_IMPORT_ROOTS = [root]
    return root


def test_the_converter_reads_verls_validation_as_evaluations(verl_dumps, verl_validation):
    folder, verl_metrics = verl_validation
    converted = convert(verl_dumps, validation=folder)
    assert converted.rollout_steps == [1, 2] and converted.evaluation_steps == STEPS
    for event in (e for e in converted.events if e["type"] == "eval"):
        lines, theirs = _lines(folder, event["step"]), verl_metrics[event["step"]]
        assert event["k"] == VAL_N and event["prompts"] == len(VAL_ROWS) and event["solved_by"] == "acc"
        # verl's own figures: its core metric (acc, mean over each prompt's n samples) and the mean reward
        assert event["metrics"]["mean@k"] == pytest.approx(theirs[f"val-core/math_dapo/acc/mean@{VAL_N}"])
        assert event["metrics"]["reward_mean@k"] == pytest.approx(theirs[f"val-aux/math_dapo/reward/mean@{VAL_N}"])
        assert event["metrics"]["greedy"] is None  # verl's dump has no greedy completion
        # the rows are verl's lines: its completions, scores, acc and pred, grouped by prompt
        assert (
            [r["completion"] for r in event["rows"]] == [line["output"] for line in lines] == VAL_ANSWERS[event["step"]]
        )
        assert [r["reward"] for r in event["rows"]] == [line["score"] for line in lines]
        assert [r["correct"] for r in event["rows"]] == [line["acc"] for line in lines]
        assert [r["answer"] for r in event["rows"]] == [line["pred"] for line in lines]
        assert [(r["prompt_index"], r["sample"]) for r in event["rows"]] == [(i // VAL_N, i % VAL_N) for i in range(6)]
    # the rollout dumps stay rollouts: the validation files are told apart by verl's "reward" key
    assert convert(folder.parent).evaluation_steps == STEPS and not convert(folder.parent).rollout_steps
    assert convert(verl_dumps).evaluation_steps == []


def test_a_folder_holding_both_imports_rollouts_and_evaluations(owner, owner_client, root, verl_validation):
    folder, verl_metrics = verl_validation
    answer = api_client(owner).post("/api/runs/import", {"path": "verl-run"}, content_type="application/json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    run = Run.objects.get(pk=body["id"])
    assert body["source"] == "verl" and body["evaluations"] == len(STEPS)
    assert body["completeness"] == (
        "rollouts for 2 steps: verl dumps every step it trained; 3 validations (steps 0, 2, 4) from verl's "
        "validation dump, as its evaluations"
    )
    assert Rollout.objects.filter(run=run).count() == 12
    evaluations = api_client(owner).get(f"/api/runs/{run.pk}/evaluations").json()["evaluations"]
    assert [(e["kind"], e["step"], e["status"]) for e in evaluations] == [("periodic", s, "completed") for s in STEPS]
    for e in evaluations:
        acc, score = _file_means(folder, e["step"])
        theirs = verl_metrics[e["step"]]
        assert e["metrics"]["mean@k"] == pytest.approx(acc) == pytest.approx(theirs["val-core/math_dapo/acc/mean@3"])
        assert e["metrics"]["reward_mean@k"] == pytest.approx(score)
        assert e["imported_from"] == f"verl's validation dump validation_data/{e['step']}.jsonl"
        assert e["k"] == VAL_N and e["temperature"] is None and e["dataset_version"] == ""
    # step 0 is verl's validation before training: the base the later ones are compared with
    assert evaluations[2]["delta"]["metrics"]["mean@k"] == pytest.approx(
        _file_means(folder, 4)[0] - _file_means(folder, 0)[0]
    )
    evaluation = Evaluation.objects.get(run=run, step=4)
    stored = list(EvalSample.objects.filter(evaluation=evaluation).order_by("prompt_index", "sample"))
    assert [s.completion for s in stored] == [line["output"] for line in _lines(folder, 4)]
    assert [s.reward for s in stored] == [line["score"] for line in _lines(folder, 4)]

    page = owner_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert 'id="evaluations-from-verl"' in page and "verl&#x27;s validation dump" in page
    assert "3 validations (steps 0, 2, 4) from verl&#x27;s validation dump" in page
    detail = owner_client.get(reverse("evaluation_detail", args=[run.pk, evaluation.pk]))
    assert detail.status_code == 200
    assert "verl&#x27;s validation dump validation_data/4.jsonl" in detail.content.decode()
    alone = api_client(owner).post(
        "/api/runs/import", {"path": "verl-run/validation_data"}, content_type="application/json"
    )
    compare = owner_client.get(reverse("run_compare"), {"runs": f"{run.pk},{alone.json()['id']}"})
    assert (
        compare.status_code == 200 and "verl&#x27;s validation dump validation_data/4.jsonl" in compare.content.decode()
    )


def test_validation_path_names_the_folder_and_the_page_takes_it(owner, owner_client, root, verl_validation):
    shutil.move(root / "verl-run" / "validation_data", root / "elsewhere")
    answer = api_client(owner).post(
        "/api/runs/import",
        {"path": "verl-run/rollout_data", "validation_path": "elsewhere"},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    assert answer.json()["evaluations"] == 3 and answer.json()["validation_path"] == str(root / "elsewhere")
    page = owner_client.post(
        reverse("run_import_files"),
        {"path": "verl-run/rollout_data", "validation_path": "elsewhere", "source": "verl", "name": "from page"},
    )
    assert page.status_code == 302
    run = Run.objects.get(name="from page")
    assert sorted(run.evaluations.values_list("step", flat=True)) == STEPS
    assert Rollout.objects.filter(run=run).count() == 12


def test_a_validation_folder_alone_is_a_run_of_its_evaluations(owner, root, verl_validation):
    folder, verl_metrics = verl_validation
    answer = api_client(owner).post(
        "/api/runs/import", {"path": "verl-run/validation_data"}, content_type="application/json"
    )
    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    assert not Rollout.objects.filter(run=run).exists()
    assert answer.json()["completeness"] == (
        "no rollouts: 3 validations (steps 0, 2, 4) from verl's validation dump, as the run's evaluations"
    )
    means = {e.step: e.metrics["mean@k"] for e in run.evaluations.all()}
    assert means == {s: pytest.approx(verl_metrics[s]["val-core/math_dapo/acc/mean@3"]) for s in STEPS}


def _refused(answer, *words):
    assert answer.status_code == 400, answer.content
    error = answer.json()["errors"][0]
    for word in words:
        assert word in error, error
    assert not Run.objects.exists() and not RunImport.objects.exists() and not Evaluation.objects.exists()


@pytest.mark.parametrize(
    "line, words",
    [
        ("{not json", ("validation_data/2.jsonl: line 4", "not JSON")),
        ("{not json", ("validation_data/2.jsonl: line 1", "not JSON")),  # its first line: still a validation
        ('{"input": "p", "output": "o", "score": 1.0, "reward": 1.0, "acc": "yes"}', ("line 4", "'acc' is 'yes'")),
        ('{"input": "p", "output": "o", "score": "high", "reward": 1.0}', ("2.jsonl: line 4", "'score'")),
        ('{"input": "p", "output": "o", "score": 1.0, "reward": 1.0, "step": 7}', ("2.jsonl", "several steps")),
    ],
)
def test_a_bad_validation_dump_is_refused_naming_file_and_line(owner, root, line, words):
    dump = root / "verl-run" / "validation_data" / "2.jsonl"
    lines = dump.read_text().splitlines()
    at = 0 if words[0].endswith("line 1") else 3
    dump.write_text("\n".join(lines[:at] + [line] + lines[at:]) + "\n")
    _refused(api_client(owner).post("/api/runs/import", {"path": "verl-run"}, content_type="application/json"), *words)


def test_a_validation_path_out_of_the_roots_or_beside_trl_files_is_refused(owner, root, tmp_path, trl_output):
    post = api_client(owner).post
    answer = post(
        "/api/runs/import",
        {"path": "verl-run/rollout_data", "validation_path": str(tmp_path)},
        content_type="application/json",
    )
    _refused(answer, "validation_path: only files under the import folders")
    shutil.copytree(trl_output.output_dir, root / "trl-out")
    answer = post(
        "/api/runs/import",
        {"path": "trl-out", "validation_path": "verl-run/validation_data"},
        content_type="application/json",
    )
    _refused(answer, "validation_path: verl's validation_data_dir")
    shutil.copytree(root / "verl-run" / "rollout_data", root / "verl-run" / "more_rollouts")
    _refused(
        post("/api/runs/import", {"path": "verl-run"}, content_type="application/json"),
        "several folders (more_rollouts, rollout_data)",
    )


def _age(path, seconds=60):
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_watch_follows_new_validations(owner, settings, tmp_path, verl_dumps, verl_validation):
    """verl validates every test_freq steps while it trains: each new validation dump becomes an evaluation at the
    next read, one still being written waits, and a read repeated stores nothing twice."""
    folder, _ = verl_validation
    root = tmp_path / "imports"
    settings.GRPO_IMPORT_ROOTS = [root]
    rollouts, validations = root / "run" / "rollout_data", root / "run" / "validation_data"
    rollouts.mkdir(parents=True)
    validations.mkdir()
    for source, target in ((verl_dumps / "1.jsonl", rollouts), (folder / "0.jsonl", validations)):
        shutil.copy(source, target)
        _age(target / source.name)
    run = run_import(owner=owner, path="run", watch=True)
    assert list(run.evaluations.values_list("step", flat=True)) == [0]

    for source, target in ((verl_dumps / "2.jsonl", rollouts), (folder / "2.jsonl", validations)):
        shutil.copy(source, target)
        _age(target / source.name)
    shutil.copy(folder / "4.jsonl", validations)  # just written: verl may still be writing it
    assert run_import_poll(run_id=run.pk)
    assert sorted(run.evaluations.values_list("step", flat=True)) == [0, 2]
    assert sorted(set(Rollout.objects.filter(run=run).values_list("step", flat=True))) == [1, 2]
    _age(validations / "4.jsonl")
    assert run_import_poll(run_id=run.pk)
    assert run_import_poll(run_id=run.pk)  # nothing new: nothing stored twice
    assert sorted(run.evaluations.values_list("step", flat=True)) == STEPS
    assert EvalSample.objects.filter(evaluation__run=run).count() == len(STEPS) * len(VAL_ROWS) * VAL_N
    four = run.evaluations.get(step=4)
    assert four.metrics["mean@k"] == pytest.approx(_file_means(folder, 4)[0])
    assert RunImport.objects.get(run=run).files == [
        "1.jsonl",
        "validation/0.jsonl",
        "2.jsonl",
        "validation/2.jsonl",
        "validation/4.jsonl",
    ]


def test_uploaded_validation_dumps_are_a_run_of_their_evaluations(owner, verl_validation):
    folder, verl_metrics = verl_validation
    files = [open(p, "rb") for p in sorted(folder.glob("*.jsonl"))]
    try:
        answer = api_client(owner).post("/api/runs/import/upload", {"files": files})
    finally:
        for f in files:
            f.close()
    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    assert answer.json()["evaluations"] == 3 and not Rollout.objects.filter(run=run).exists()
    means = {e.step: e.metrics["reward_mean@k"] for e in run.evaluations.all()}
    assert means == {s: pytest.approx(verl_metrics[s]["val-aux/math_dapo/reward/mean@3"]) for s in STEPS}
