"""A run trained elsewhere, imported from the files TRL and verl wrote (tests/attach/conftest.py) through the API:
the stored rows are the files', every inspection view opens on it, and its page says how complete the record is
and that verl's advantages were computed by grpo-web."""

import shutil

import pandas as pd
import pytest
from django.urls import reverse

from runs.models import Rollout, Run, RunImport, StepMetric
from runs.rollouts.selectors import step_view
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def roots(settings, tmp_path, trl_output, verl_dumps):
    """An import folder holding the TRL output_dir and the verl dump folder."""
    root = tmp_path / "imports"
    shutil.copytree(trl_output.output_dir, root / "trl-out")
    shutil.copytree(verl_dumps, root / "verl-rollouts")
    settings.GRPO_IMPORT_ROOTS = [root]
    return root


def test_a_trl_output_dir_imports_as_a_finished_run_with_trls_rows(owner, roots, trl_output):
    answer = api_client(owner).post(
        "/api/runs/import",
        {"path": "trl-out", "model": "tiny", "options": {"reward_weights": [1.0, 0.5]}},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    run = Run.objects.get(pk=body["id"])
    assert run.origin == Run.Origin.IMPORTED and run.status == "completed" and run.dataset_version is None
    assert body["source"] == "trl" and not body["advantage_computed"]
    assert body["completeness"] == "rollouts for 2 of 3 steps: TRL wrote every 2nd batch (logging_steps=2)"
    table = pd.read_parquet(roots / "trl-out" / "completions" / "completions_00002.parquet")
    stored = list(Rollout.objects.filter(run=run, step=2).order_by("index"))
    assert [r.completion for r in stored] == list(table["completion"])
    assert [r.advantage for r in stored] == table["advantage"].tolist()
    assert [r["name"] for r in run.rewards] == ["digit_ratio", "think_format"]
    assert StepMetric.objects.filter(run=run, step=2).get().metrics["reward"] is not None
    # the groups page recomputes each advantage from the stored rewards by TRL's formula: TRL's agrees
    view = step_view(run, 2, groups=100)
    for c in [c for g in view["groups"] for c in g["completions"]]:
        assert c["formula_advantage"] == pytest.approx(c["advantage"], abs=2e-4, rel=1e-4)


def test_a_verl_dump_folder_says_its_advantages_are_computed(owner, owner_client, roots):
    answer = api_client(owner).post(
        "/api/runs/import", {"path": str(roots / "verl-rollouts")}, content_type="application/json"
    )
    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    assert answer.json()["advantage_computed"] and RunImport.objects.get(run=run).source == "verl"
    assert Rollout.objects.filter(run=run).count() == 12
    page = owner_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "computed by grpo-web from the scores with verl&#x27;s GRPO estimator" in page
    assert "Rollouts for 2 steps: verl dumps every step it trained." in page
    for name, args in (
        ("run_step_json", [run.pk, 1]),
        ("run_rollouts", [run.pk]),
        ("run_rollouts_json", [run.pk]),
        ("run_reflection", [run.pk]),
        ("run_detectors", [run.pk]),
        ("run_rollouts_jsonl", [run.pk]),
    ):
        assert owner_client.get(reverse(name, args=args)).status_code == 200, name
    other = api_client(owner).post("/api/runs/import", {"path": "trl-out"}, content_type="application/json")
    compare = owner_client.get(reverse("run_compare"), {"runs": f"{run.pk},{other.json()['id']}"})
    assert compare.status_code == 200 and run.name in compare.content.decode()
    metrics = owner_client.get(reverse("run_compare_metrics"), {"runs": f"{run.pk},{other.json()['id']}"})
    assert metrics.status_code == 200


def test_uploaded_tables_import_like_the_folder(owner, roots):
    folder = roots / "trl-out" / "completions"
    files = [open(p, "rb") for p in sorted(folder.glob("*.parquet"))]
    try:
        answer = api_client(owner).post("/api/runs/import/upload", {"files": files, "num_generations": 4})
    finally:
        for f in files:
            f.close()
    assert answer.status_code == 201, answer.content
    assert Rollout.objects.filter(run_id=answer.json()["id"]).values("step").distinct().count() == 2


def test_an_outsider_cannot_read_or_stop_an_imported_run(owner, outsider, roots):
    run_id = (
        api_client(owner)
        .post("/api/runs/import", {"path": "verl-rollouts"}, content_type="application/json")
        .json()["id"]
    )
    outsider_api = api_client(outsider)
    assert outsider_api.get(f"/api/runs/{run_id}/import").status_code == 404
    assert outsider_api.post(f"/api/runs/{run_id}/import/stop").status_code == 404
