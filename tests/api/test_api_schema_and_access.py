"""The OpenAPI schema is generated from the endpoints, valid, and covers them; every object endpoint it lists answers
404 to an outsider, and to a reader of the object any change."""

import io
import re

import pytest
from openapi_spec_validator import validate

from grpo_web.api import api
from rewards.models import RewardFunction
from runs.models import Review
from runs.review.services import review_create

pytestmark = pytest.mark.django_db


def _schema():
    return api.get_openapi_schema()


def test_the_served_schema_is_valid_openapi(owner_api):
    response = owner_api.get("/api/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    validate(schema)
    assert schema["info"]["title"] == "grpo-web API"
    assert {
        "/api/runs",
        "/api/runs/{run_id}/rollouts",
        "/api/datasets",
        "/api/rewards",
        "/api/runs/{run_id}/evaluations",
        "/api/runs/{run_id}/metrics",
    } <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["TokenAuth"]["scheme"] == "bearer"


def test_the_schema_documents_the_rollout_browsers_filters():
    params = {p["name"] for p in _schema()["paths"]["/api/runs/{run_id}/rollouts"]["get"]["parameters"]}
    assert {"step_min", "reward_min", "adv_max", "truncated", "zero_std", "reflective", "q", "after"} <= params


def test_the_reference_page_is_served_without_a_cdn(owner_client):
    html = owner_client.get("/api/docs").content.decode()
    assert "swagger" in html.lower()
    assert not re.search(r"""(src|href)=["']https?://""", html), "the API reference must not load from a CDN"


def _object_calls(run, dataset, reward, job, recipe):
    """(method, path, template) for every operation of the schema that names an object, filled with the owner's."""
    ids = {
        "run_id": run.pk,
        "dataset_id": dataset.pk,
        "reward_id": reward.pk,
        "number": 1,
        "step": 1,
        "job_id": job.pk,
        "recipe_id": recipe.pk,
        "action": "cancel",
        "key": "final",
        "label_id": 1,
        "review_id": Review.objects.filter(run=run).first().pk,
        "position": 0,
    }
    calls = []
    for path, operations in _schema()["paths"].items():
        names = re.findall(r"{(\w+)}", path)
        if not names:
            continue
        for method in operations:
            calls.append((method, path.format(**{n: ids[n] for n in names}), path))
    return calls


def _send(client, method, path, template, dataset_version):
    """A well-formed request, so what answers is the access rule, not the body's validation."""
    if method in ("get", "delete"):
        return getattr(client, method)(path)
    bodies = {
        "/api/datasets/{dataset_id}/versions": None,
        "/api/rewards/{reward_id}/versions": {
            "source": "def f(completions, **kw):\n    return [1.0]\n",
            "entrypoint": "f",
        },
        "/api/runs/{run_id}/evaluations": {"dataset_version": dataset_version.pk},
        "/api/runs/{run_id}/cancel": {},
        "/api/runs/{run_id}/resume": {},
        "/api/runs/{run_id}/retry": {},
        "/api/runs/{run_id}/import/stop": {},
        "/api/recipes/{recipe_id}/{action}": {},
        "/api/runs/{run_id}": {"notes": "changed"},  # PATCH
        "/api/runs/{run_id}/labels": {"labels": [{"name": "reward hack", "step": 1}]},
        "/api/runs/{run_id}/reviews": {"filters": {"step_max": 1}, "size": 2},
        "/api/runs/{run_id}/reviews/{review_id}/next": {},
        "/api/runs/{run_id}/alerts/verdicts": {
            "key": "detector/repetition",
            "evidence": "0" * 16,
            "verdict": "dismiss",
        },
        "/api/attach/runs/{run_id}/events": {},  # an attached run's batch: its own tests send real ones
        "/api/attach/runs/{run_id}/tokens/{step}": {},  # a token shard: its own tests send real ones
        "/api/attach/runs/{run_id}/heartbeat": {"resume_key": "k"},
        "/api/attach/runs/{run_id}/finish": {"resume_key": "k"},
    }
    assert template in bodies, f"{template}: give this new endpoint a well-formed body here"
    if bodies[template] is None:
        upload = io.BytesIO(b'{"prompt": "1+1?"}\n')
        upload.name = "rows.jsonl"
        return client.post(path, {"file": upload})
    return getattr(client, method)(path, bodies[template], content_type="application/json")


@pytest.fixture
def objects(inspected_run, dataset_version, owner):
    from runs.models import Recipe, RejectionJob

    job = RejectionJob.objects.create(
        owner=owner,
        name="kept",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        settings={},
        status=RejectionJob.Status.COMPLETED,
    )
    recipe = Recipe.objects.create(
        owner=owner,
        name="mine",
        stages=[{"kind": "grpo", "model": "tiny", "dataset": dataset_version.pk}],
        outputs=[{}],
    )
    review_create(run=inspected_run, user=owner, data={}, mode="all")
    return inspected_run, dataset_version.dataset, RewardFunction.objects.filter(owner=owner).first(), job, recipe


def test_every_object_endpoint_answers_404_to_an_outsider(outsider_api, objects):
    calls = _object_calls(*objects)
    assert len(calls) >= 15
    for method, path, template in calls:
        response = _send(outsider_api, method, path, template, objects[1].latest_version)
        assert response.status_code == 404, (method, path, response.status_code)


def test_the_owner_reads_every_object_endpoint(owner_api, objects):
    for method, path, _ in _object_calls(*objects):
        if method == "get":
            assert owner_api.get(path).status_code == 200, path


def test_every_change_is_refused_to_a_read_token_before_it_runs(reader_api, objects):
    run = objects[0]
    for method, path, template in _object_calls(*objects):
        if method != "get":
            assert _send(reader_api, method, path, template, objects[1].latest_version).status_code == 403, path
    run.refresh_from_db()
    assert run.status == "completed" and run.attempt == 1


def test_every_json_answer_matches_its_schema(owner_api, objects):
    """Each GET's body validates against the response schema the OpenAPI document declares for it (JSON Schema
    2020-12, as OpenAPI 3.1 uses): the schema describes what the API really sends."""
    from jsonschema import Draft202012Validator

    schema = _schema()
    checked = 0
    for method, path, template in _object_calls(*objects) + [
        ("get", p, p) for p in schema["paths"] if "{" not in p and "get" in schema["paths"][p]
    ]:
        if method != "get" or path.endswith((".json", "/docs")):
            continue
        responses = schema["paths"][template]["get"]["responses"]
        declared = (responses.get(200) or responses.get("200") or {}).get("content", {})
        if "application/json" not in declared:
            continue
        required = {  # a query an endpoint cannot answer without (a search's text) is given a plain value
            p["name"]: {"integer": 1, "number": 1.0}.get(p.get("schema", {}).get("type"), "answer")
            for p in schema["paths"][template]["get"].get("parameters", [])
            if p["in"] == "query" and p.get("required")
        }
        response = owner_api.get(path, required)
        assert response.status_code == 200, (path, required, response.status_code, response.content[:300])
        if not response["Content-Type"].startswith("application/json"):
            continue  # a streamed export or a YAML file: its own tests read it
        validator = Draft202012Validator({**declared["application/json"]["schema"], "components": schema["components"]})
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(response.json())]
        assert not errors, (path, errors[:5])
        checked += 1
    assert checked >= 12


def test_the_api_documents_every_filter_the_rollout_browser_has():
    from runs.rollouts.filters import RolloutFilterForm

    params = {p["name"] for p in _schema()["paths"]["/api/runs/{run_id}/rollouts"]["get"]["parameters"]}
    assert set(RolloutFilterForm.base_fields) <= params
