"""A run's engine (local or ray) and its number of Ray workers: on the run form, in the run YAML (export, import,
clone, retry) and in the API; a bad value is refused naming its field. No training here."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.lifecycle.services import run_retry
from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Run, Worker
from tests.api.conftest import api_client
from tests.conftest import run_form_data
from tests.lifecycle.test_code_tests_in_runs import tasks  # noqa: F401  (a dataset the code_tests built-in scores)

pytestmark = pytest.mark.django_db

CODE_TESTS = [{"name": "code_tests", "weight": 1.0, "builtin": "code_tests"}]


@pytest.fixture
def ray_worker_online():
    now = timezone.now()
    return Worker.objects.create(
        name="ray@head",
        hostname="head",
        gpus=[],
        queues=["training-ray"],
        started_at=now - timedelta(hours=1),
        last_seen=now,
    )


@pytest.fixture
def owner_api(owner):
    return api_client(owner)


def form_data(owner, dataset, **changes) -> dict:
    data = {k: v for k, v in run_form_data(owner).items() if not k.startswith("reward_")}
    data.update(
        name="on ray",
        dataset_version=dataset.pk,
        builtin_code_tests="on",
        builtin_code_tests_weight=1.0,
        max_steps=2,
        **changes,
    )
    return data


def ray_run(owner, dataset) -> Run:
    return Run.objects.create(
        owner=owner,
        name="r",
        model="tiny",
        dataset_version=dataset,
        rewards=CODE_TESTS,
        config={"max_steps": 2, "num_generations": 4, "per_device_train_batch_size": 4},
        total_steps=2,
        engine="ray",
        num_workers=2,
        status=Run.Status.FAILED,
    )


def test_the_run_form_starts_a_ray_run_with_its_workers(owner_client, owner, tasks, ray_worker_online):  # noqa: F811
    page = owner_client.get(reverse("run_new")).content.decode()
    assert 'id="engine"' in page and "RAY_ADDRESS" in page  # the Engine box says what a Ray run needs
    response = owner_client.post(reverse("run_new"), form_data(owner, tasks, engine="ray", num_workers=2))
    assert response.status_code == 302, response.context["form"].errors
    run = Run.objects.get()
    assert (run.engine, run.num_workers) == ("ray", 2)


def test_a_run_form_without_the_engine_box_makes_a_local_run(owner_client, owner, tasks):  # noqa: F811
    data = form_data(owner, tasks)
    data.pop("engine", None), data.pop("num_workers", None)
    assert owner_client.post(reverse("run_new"), data).status_code == 302
    assert (Run.objects.get().engine, Run.objects.get().num_workers) == ("local", 1)


@pytest.mark.parametrize(
    "changes, field, error",
    [
        ({"engine": "local", "num_workers": 2}, "num_workers", "Only a Ray run has several workers"),
        ({"engine": "ray", "num_workers": 0}, "num_workers", "greater than or equal to 1"),
        ({"engine": "spark", "num_workers": 1}, "engine", "Select a valid choice"),
    ],
)
def test_a_bad_engine_on_the_form_is_named_on_its_field(
    owner_client,
    owner,
    tasks,  # noqa: F811
    ray_worker_online,
    changes,
    field,
    error,
):
    response = owner_client.post(reverse("run_new"), form_data(owner, tasks, **changes))
    assert response.status_code == 400
    assert any(error in e for e in response.context["form"].errors[field]), response.context["form"].errors
    assert not Run.objects.exists()


def test_a_ray_run_with_no_ray_worker_online_is_refused_naming_the_engine(owner_client, owner, tasks):  # noqa: F811
    response = owner_client.post(reverse("run_new"), form_data(owner, tasks, engine="ray", num_workers=2))
    assert response.status_code == 400
    assert "engine: no online worker serves a Ray cluster" in response.content.decode()
    queued = owner_client.post(
        reverse("run_new"), form_data(owner, tasks, engine="ray", num_workers=2, queue_anyway="on")
    )
    assert queued.status_code == 302 and Run.objects.get().engine == "ray"


def test_the_yaml_carries_the_engine_out_and_back(owner, tasks):  # noqa: F811
    run = ray_run(owner, tasks)
    text = run_yaml(run)
    assert "engine: ray\n" in text and "num_workers: 2\n" in text
    again = parse_run_yaml(text, owner=owner)
    assert again.errors == [] and (again.engine, again.num_workers) == ("ray", 2)
    # a TRL user's YAML without them is a local run
    plain = parse_run_yaml(f"dataset_name: {tasks.dataset.name}\nreward_funcs: [code_tests]\n", owner=owner)
    assert plain.errors == [] and (plain.engine, plain.num_workers) == ("local", 1)


@pytest.mark.parametrize(
    "keys, error",
    [
        ("engine: spark\n", "engine: must be local or ray, not 'spark'"),
        ("engine: ray\nnum_workers: many\n", "num_workers: 'many' is not a whole number from 1 to 256"),
        ("engine: ray\nnum_workers: 0\n", "num_workers: 0 is not a whole number"),
        ("num_workers: 4\n", "num_workers: only a Ray run has several workers"),
    ],
)
def test_a_bad_engine_in_the_yaml_names_the_key(owner, tasks, keys, error):  # noqa: F811
    imported = parse_run_yaml(f"dataset_name: {tasks.dataset.name}\nreward_funcs: [code_tests]\n{keys}", owner=owner)
    assert any(e.startswith(error) for e in imported.errors), imported.errors


def test_an_imported_yaml_and_a_clone_fill_the_engine_box(owner_client, owner, tasks):  # noqa: F811
    run = ray_run(owner, tasks)
    for response in (
        owner_client.post(reverse("run_import"), {"yaml": run_yaml(run)}),
        owner_client.get(reverse("run_clone", args=[run.pk])),
    ):
        form = response.context["form"]
        assert (form["engine"].value(), form["num_workers"].value()) == ("ray", 2)


def test_a_retry_keeps_the_engine(owner, tasks, ray_worker_online):  # noqa: F811
    retried = run_retry(run=ray_run(owner, tasks))
    assert (retried.engine, retried.num_workers) == ("ray", 2)


def test_the_api_starts_a_ray_run_and_shows_its_engine(owner_api, owner, tasks, ray_worker_online):  # noqa: F811
    body = {
        "config": {
            "name": "api ray",
            "dataset_name": tasks.dataset.name,
            "reward_funcs": ["code_tests"],
            "max_steps": 2,
            "engine": "ray",
            "num_workers": 2,
        }
    }
    made = owner_api.post("/api/runs", body, content_type="application/json")
    assert made.status_code == 201, made.content
    assert (made.json()["engine"], made.json()["num_workers"]) == ("ray", 2)
    shown = owner_api.get(f"/api/runs/{made.json()['id']}").json()
    assert (shown["engine"], shown["num_workers"]) == ("ray", 2)
    exported = owner_api.get(f"/api/runs/{made.json()['id']}/config.yaml").content.decode()
    assert "engine: ray\n" in exported and "num_workers: 2\n" in exported


def test_the_api_refuses_a_bad_engine_naming_the_key(owner_api, owner, tasks):  # noqa: F811
    body = {
        "config": {
            "dataset_name": tasks.dataset.name,
            "reward_funcs": ["code_tests"],
            "engine": "ray",
            "num_workers": 300,
        }
    }
    refused = owner_api.post("/api/runs", body, content_type="application/json")
    assert refused.status_code == 400
    assert any(e.startswith("num_workers: 300") for e in refused.json()["errors"]), refused.json()
    no_ray = owner_api.post(
        "/api/runs", {"config": {**body["config"], "num_workers": 2}}, content_type="application/json"
    )
    assert no_ray.status_code == 400 and any(
        e.startswith("engine: no online worker serves a Ray cluster") for e in no_ray.json()["errors"]
    )
    assert not Run.objects.exists()
