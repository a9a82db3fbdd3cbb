"""What the API's endpoints do, as a script sees them: the same objects, filters and errors as the pages."""

import io
import json

import pyarrow.parquet as pq
import pytest

from rewards.models import RewardFunction
from runs.models import Dataset, Run
from tests.rollouts.test_rollout_exports import content

pytestmark = pytest.mark.django_db


def _upload(client, path, data: bytes, filename="rows.jsonl", **fields):
    f = io.BytesIO(data)
    f.name = filename
    return client.post(path, {"file": f, **fields})


def test_a_dataset_uploads_and_lists_with_its_versions(owner_api, owner):
    rows = b"".join(json.dumps({"prompt": f"{i}+1?", "answer": str(i + 1)}).encode() + b"\n" for i in range(5))
    response = _upload(owner_api, "/api/datasets", rows, name="sums")
    assert response.status_code == 201, response.content
    assert response.json()["row_count"] == 5 and response.json()["number"] == 1
    dataset = Dataset.objects.get(owner=owner, name="sums")
    second = _upload(owner_api, f"/api/datasets/{dataset.pk}/versions", rows[: rows.index(b"\n") + 1])
    assert second.status_code == 201 and second.json()["number"] == 2
    listed = {d["name"]: d for d in owner_api.get("/api/datasets").json()}
    assert listed["sums"]["latest_version"]["number"] == 2 and listed["sums"]["shared"] is False
    detail = owner_api.get(f"/api/datasets/{dataset.pk}").json()
    assert [v["number"] for v in detail["versions"]] == [2, 1]
    page = owner_api.get(f"/api/datasets/{dataset.pk}/versions/1/rows", {"q": "3+1"}).json()
    assert page["total"] == 1 and page["rows"][0]["answer"] == "4" and page["rows"][0]["row"] == 4


@pytest.mark.parametrize(
    "data, where",
    [
        (b'{"prompt": "a"}\n{"prompt": \n', "line 2"),
        (b'{"prompt": "a"}\n{"question": "b"}\n', "line 2: column 'prompt'"),
        (b"\xff\xfe\x00garbage", "UTF-8"),
    ],
)
def test_a_bad_upload_is_a_400_naming_the_row_and_saves_nothing(owner_api, owner, data, where):
    response = _upload(owner_api, "/api/datasets", data, name="bad")
    assert response.status_code == 400
    assert any(where in e for e in response.json()["errors"]), response.json()
    assert not Dataset.objects.filter(owner=owner, name="bad").exists()


def test_a_reward_function_is_made_from_a_template_then_versioned(owner_api, owner):
    made = owner_api.post(
        "/api/rewards", {"name": "short", "template": "length_penalty"}, content_type="application/json"
    )
    assert made.status_code == 201, made.content
    rid = made.json()["id"]
    assert made.json()["latest"]["entrypoint"] == "length_penalty"
    code = "def short(completions, **kwargs):\n    return [-len(c) / 100 for c in completions]\n"
    saved = owner_api.post(
        f"/api/rewards/{rid}/versions", {"source": code, "entrypoint": "short"}, content_type="application/json"
    )
    assert saved.status_code == 201 and saved.json()["latest_version"] == 2
    same = owner_api.post(
        f"/api/rewards/{rid}/versions", {"source": code, "entrypoint": "short"}, content_type="application/json"
    )
    assert same.status_code == 200 and same.json()["versions"] == [2, 1]
    assert owner_api.get(f"/api/rewards/{rid}/versions/2").json()["source"] == code


@pytest.mark.parametrize(
    "body, error",
    [
        ({"name": "x", "source": "def f(completions):\n  return [\n", "entrypoint": "f"}, "line"),
        ({"name": "x", "source": "def f(completions, **kw):\n    return []\n", "entrypoint": "g"}, "g"),
        ({"name": "bad name!", "template": "digit_ratio"}, "name"),
        ({"name": "x"}, "source"),
        ({"name": "digit_ratio", "template": "digit_ratio"}, "already"),
    ],
)
def test_a_bad_reward_is_a_400_that_names_the_problem(owner_api, body, error):
    response = owner_api.post("/api/rewards", body, content_type="application/json")
    assert response.status_code == 400
    assert any(error in e for e in response.json()["errors"]), response.json()


@pytest.mark.parametrize(
    "body, error",
    [
        ({"yaml": "name: [unclosed"}, "YAML"),
        ({"config": {"dataset_name": "nope", "reward_funcs": ["digit_ratio"]}}, "dataset_name"),
        ({"config": {"dataset_name": "arithmetic", "reward_funcs": ["nope"]}}, "nope"),
        (
            {
                "config": {
                    "dataset_name": "arithmetic",
                    "reward_funcs": ["digit_ratio"],
                    "num_generations": 3,
                    "per_device_train_batch_size": 8,
                }
            },
            "num_generations",
        ),
        ({}, "yaml or config"),
    ],
)
# a run that starts is in tests/api/test_cli_client.py: its reward check needs a real sandbox worker
def test_a_run_that_would_fail_is_refused_naming_the_field(owner_api, dataset_version, tiny_model, body, error):
    response = owner_api.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 400
    assert any(error in e for e in response.json()["errors"]), response.json()
    assert not Run.objects.exists()


def test_runs_list_with_the_dashboards_figures_and_filters(owner_api, inspected_run):
    runs = owner_api.get("/api/runs").json()
    assert [r["name"] for r in runs] == ["api run"]
    assert runs[0]["latest_reward"] == pytest.approx(1.6)
    assert owner_api.get("/api/runs", {"status": "failed"}).json() == []
    assert owner_api.get("/api/runs", {"q": "api"}).json()[0]["id"] == inspected_run.pk
    assert owner_api.get("/api/runs", {"scope": "shared"}).json() == []


def test_rollouts_come_with_the_browsers_filters_and_a_cursor(owner_api, inspected_run):
    url = f"/api/runs/{inspected_run.pk}/rollouts"
    everything = owner_api.get(url).json()
    assert len(everything["rows"]) == 6 and everything["reward_names"] == ["accuracy", "digit_ratio"]
    step2 = owner_api.get(url, {"step_min": 2}).json()["rows"]
    assert {r["step"] for r in step2} == {2} and len(step2) == 2
    assert set(step2[0]["rewards"]) == {"accuracy", "digit_ratio"}
    wait = owner_api.get(url, {"phrase": "Wait"}).json()["rows"]
    assert sorted(r["completion"] for r in wait) == ["2, wait", "Wait, 4"]
    high = owner_api.get(url, {"reward_min": 1.9}).json()["rows"]
    assert all(r["reward"] >= 1.9 for r in high) and len(high) == 2


@pytest.mark.parametrize(
    "params",
    [{"step_min": "x"}, {"truncated": "maybe"}, {"after": "not-a-cursor"}, {"reflection": "not one of its phrases"}],
)
def test_a_bad_filter_is_a_400_naming_it(owner_api, inspected_run, params):
    response = owner_api.get(f"/api/runs/{inspected_run.pk}/rollouts", params)
    assert response.status_code in (400, 422)
    assert list(params)[0] in response.content.decode()


def test_an_export_streams_what_the_filters_select(owner_api, inspected_run):
    url = f"/api/runs/{inspected_run.pk}/rollouts/export"
    response = owner_api.get(url, {"step_max": 1})
    lines = content(response).decode().splitlines()
    assert response["Content-Type"] == "application/x-ndjson"
    assert len(lines) == 4 and {json.loads(line)["step"] for line in lines} == {1}
    parquet = owner_api.get(url, {"format": "parquet", "step_min": 2})
    table = pq.read_table(io.BytesIO(content(parquet)))
    assert table.num_rows == 2


@pytest.mark.parametrize("path", ["rollouts", "rollouts/export"])
def test_a_key_that_is_no_filter_is_refused_not_ignored(owner_api, inspected_run, path):
    # a typo must not quietly export every row instead of the few asked for
    response = owner_api.get(f"/api/runs/{inspected_run.pk}/{path}", {"stepmin": 2, "reward_min": 1})
    assert response.status_code == 400
    assert response.json()["detail"].startswith("unknown filter: stepmin (known: step_min, step_max,")


def test_metrics_and_evaluations_read_as_on_the_run_page(owner_api, inspected_run):
    metrics = owner_api.get(f"/api/runs/{inspected_run.pk}/metrics").json()
    assert metrics["steps"] == [1, 2] and metrics["series"]["reward"] == [1.2, 1.6]
    smoothed = owner_api.get(f"/api/runs/{inspected_run.pk}/metrics", {"smooth": 0.5}).json()
    assert smoothed["smoothed"]["reward"][1] != 1.6
    assert owner_api.get(f"/api/runs/{inspected_run.pk}/metrics", {"smooth": 1}).status_code == 422
    assert owner_api.get(f"/api/runs/{inspected_run.pk}/evaluations").json()["evaluations"] == []


def test_cancelling_a_queued_run_through_the_api(owner_api, owner, dataset_version):
    run = Run.objects.create(
        owner=owner,
        name="q",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[{"name": "digit_ratio", "weight": 1.0}],
        config={"max_steps": 2},
        total_steps=2,
    )
    response = owner_api.post(f"/api/runs/{run.pk}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"


def test_an_evaluation_is_queued_with_the_run_pages_defaults(owner_api, inspected_run, dataset_version):
    response = owner_api.post(
        f"/api/runs/{inspected_run.pk}/evaluations",
        {"dataset_version": dataset_version.pk, "split": "all"},
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    assert inspected_run.evaluations.get().status == "queued"
    bad = owner_api.post(
        f"/api/runs/{inspected_run.pk}/evaluations",
        {"dataset_version": dataset_version.pk, "model": "checkpoint-99"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and any("model" in e for e in bad.json()["errors"])


def test_reward_functions_list_only_what_the_user_may_see(owner_api, outsider_api, owner):
    names = {r["name"] for r in owner_api.get("/api/rewards").json()}
    assert names == set(RewardFunction.objects.filter(owner=owner).values_list("name", flat=True))
    assert all(r["shared"] is False for r in outsider_api.get("/api/rewards").json())
    assert not names & {r["name"] for r in outsider_api.get("/api/rewards").json() if r["owner"] == "owner"}


def test_an_sft_run_starts_from_sftconfig_yaml(owner_api, owner, tiny_model, monkeypatch):
    from workers.training.coldstart import cold_start_rows

    monkeypatch.setattr("runs.lifecycle.services._enqueue", lambda run: None)
    rows = b"".join(json.dumps(r).encode() + b"\n" for r in cold_start_rows(8))
    assert _upload(owner_api, "/api/datasets", rows, name="worked").status_code == 201
    body = {
        "yaml": "trainer: sft\nname: cold start\nmodel_name_or_path: tiny\ndataset_name: worked\n"
        "max_steps: 5\nlearning_rate: 0.001\nmax_length: 64\n"
    }
    response = owner_api.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 201, response.content
    run = response.json()
    assert run["kind"] == "sft" and run["total_steps"] == 5 and run["rewards"] == []
    assert run["config"]["max_length"] == 64 and "num_generations" not in run["config"]
    assert Run.objects.get(pk=run["id"]).kind == "sft"


def test_a_rejection_job_is_queued_and_read_back(owner_api, owner, dataset_version, tiny_model, monkeypatch):
    monkeypatch.setattr("runs.sampling.services._enqueue", lambda job: None)
    body = {
        "name": "kept",
        "model": "tiny",
        "dataset_version": dataset_version.pk,
        "rewards": ["accuracy"],
        "settings": {"k": 4, "threshold": 1.0, "max_per_prompt": 1},
    }
    response = owner_api.post("/api/rejection-jobs", body, content_type="application/json")
    assert response.status_code == 201, response.content
    job = response.json()
    assert job["status"] == "queued" and job["settings"]["k"] == 4 and job["rewards"][0]["name"] == "accuracy"
    assert owner_api.get(f"/api/rejection-jobs/{job['id']}").json()["name"] == "kept"
    assert [j["id"] for j in owner_api.get("/api/rejection-jobs").json()] == [job["id"]]
    assert owner_api.get(f"/api/rejection-jobs/{job['id']}/samples").json()["samples"] == []
    bad = owner_api.post(
        "/api/rejection-jobs",
        {**body, "rewards": ["nope"], "settings": {"k": 0, "x": 1}},
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert bad.json()["errors"] == [
        "settings: x is not a setting (k, max_new_tokens, max_per_prompt, max_prompts, "
        "mix_rows, seed, solved_by, temperature, threshold)",
        "rewards: you have no reward function 'nope'",
    ]


def test_the_models_endpoint_lists_base_models_with_their_runs(owner_api, inspected_run):
    models = owner_api.get("/api/models").json()
    assert {"key": inspected_run.model, "base": True, "used_by": [inspected_run.pk]}.items() <= models[-1].items()


def test_a_recipe_is_made_from_a_template_and_read_back(owner_api, owner, dataset_version):
    response = owner_api.post(
        "/api/recipes",
        {"template": "R1-Zero", "prompts": dataset_version.pk, "name": "zero"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    recipe = response.json()
    assert recipe["status"] == "draft" and [s["kind"] for s in recipe["stages"]] == ["grpo"]
    assert owner_api.get(f"/api/recipes/{recipe['id']}").json()["pipeline"][0]["status"] == "waiting"
    bad = owner_api.post(
        "/api/recipes", {"stages": [{"kind": "sft", "model": "stage:1"}]}, content_type="application/json"
    )
    assert bad.status_code == 400 and bad.json()["errors"][0].startswith("stage 1: model names stage 1")
    assert owner_api.post(f"/api/recipes/{recipe['id']}/resume").json()["errors"] == [
        "only a failed or cancelled recipe can be resumed"
    ]
