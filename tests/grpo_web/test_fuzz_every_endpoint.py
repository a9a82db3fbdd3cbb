"""Missing, extra and garbage fields sent to every URL of the app, by GET (query) and POST (form): never a 5xx.

The URLs are read from the URL configuration, so a new endpoint is fuzzed without being listed here; each object in a
URL is one the signed-in user owns, so the views get past their owner check and parse what they are sent."""

from __future__ import annotations

import random

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.http import urlencode

from rewards.models import RewardFunction
from runs.datasets.forms import DatasetHubForm, DatasetMappingForm, DatasetUploadForm
from runs.evaluations.forms import EvaluationForm
from runs.lifecycle.forms import RunForm
from runs.models import DatasetImport, EvalSample, Evaluation, Recipe, RejectionJob, RejectionSample
from runs.review.services import review_create
from runs.rollouts.labels import labels_create
from runs.sampling.forms import RejectionJobForm
from tests.rollouts.inspect_data import ingest, make_run, metrics_event, rollouts_event

pytestmark = pytest.mark.django_db

GARBAGE = [
    "",
    " ",
    "x",
    "-1",
    "0",
    "1e309",
    "nan",
    "-inf",
    "99999999999999999999999999",
    "\x00",
    "\u202e\ufeff",
    "<script>alert(1)</script>",
    "[" * 3000,
    '{"a": ' * 3000,
    "é" * 20000,
    "1,2,3",
    "true",
    "null",
    "../../etc/passwd",
    "%s%s%n",
    "'; DROP TABLE runs_run; --",
]
EXTRA = [
    "tags",
    "notes",
    "metric",
    "template",
    "prompts",
    "sft",
    "confirm",
    "source",
    "action",
    "phrases",
    "threshold",
    "name",
    "yaml",
    "q",
    "page",
    "from",
    "groups",
    "step",
    "runs",
    "metric",
    "smooth",
    "x",
    "prompt",
    "solved_by",
    "cursor",
    "sort",
    "show",
    "a",
    "b",
    "model",
    "model_path",
    "split",
    "file",
    "text",
    "hf-local_path",
    "hf-hub_id",
    "queue_anyway",
    "ids",
    "ceiling_share",
    "window",
    "cusum_h",
    "first_step_below",
    "weight-0",
    "weight-1",
    "version-0",
    "replay",
]
SKIPPED = {"run_events", "run_compare_events", "admin", "logout"}  # endless event streams; Django's own admin; logout


def url_patterns(resolvers=None, prefix=""):
    for entry in resolvers if resolvers is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin"):
                continue
            yield from url_patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield entry.name, prefix + str(entry.pattern)


@pytest.fixture
def world(owner, dataset_version, eval_version):
    run = make_run(owner, eval_version)
    ingest(
        run,
        metrics_event(1, reward=0.5),
        rollouts_event(1, [("What is 2 + 2?", [("4", [1.0, 1.0]), ("5", [0.0, 1.0])])]),
    )
    evaluation = Evaluation.objects.create(
        run=run,
        kind=Evaluation.Kind.STANDALONE,
        label="base",
        model="tiny",
        dataset_version=eval_version,
        status=Evaluation.Status.COMPLETED,
        k=2,
        metrics={"mean@k": 0.5},
    )
    EvalSample.objects.create(
        evaluation=evaluation,
        prompt_index=0,
        sample=0,
        prompt="p",
        prompt_key="0" * 16,
        completion="c",
        rewards=[1.0],
        reward=1.0,
        correct=True,
        length=1,
    )
    reward = RewardFunction.objects.filter(owner=owner).first()
    key = run.rollouts.values_list("prompt_key", flat=True).first()
    job = DatasetImport.objects.create(owner=owner, name="job", source={"hub_id": "a/b"})
    sampling = RejectionJob.objects.create(
        owner=owner,
        name="kept",
        model="tiny",
        dataset_version=eval_version,
        rewards=[],
        settings={"k": 2},
        status=RejectionJob.Status.COMPLETED,
        stats={"kept": 1, "samples": 1},
    )
    RejectionSample.objects.create(
        job=sampling,
        prompt_index=0,
        sample=0,
        prompt="p",
        completion="c",
        rewards=[1.0],
        reward=1.0,
        passed=True,
        kept=True,
    )
    recipe = Recipe.objects.create(
        owner=owner, name="recipe", stages=[{"kind": "grpo", "model": "tiny", "dataset": eval_version.pk}], outputs=[{}]
    )
    review = review_create(run=run, user=owner, data={}, mode="all")
    label = labels_create(run=run, user=owner, items=[{"name": "reward hack", "step": 1, "group": 0}]).created[0]
    return {
        "run": run,
        "review": review,
        "label": label,
        "version": eval_version,
        "reward": reward,
        "evaluation": evaluation,
        "key": key,
        "job": job,
        "sampling": sampling,
        "recipe": recipe,
    }


def fill(route: str, world) -> str:
    """The route with each <converter:name> replaced by an object of the signed-in user."""
    run, version = world["run"], world["version"]
    values = {
        "datasets/imports/<int:pk>": "imports/" + str(world["job"].pk),
        "datasets/<int:pk>": str(version.dataset_id),
        "rewards/<int:pk>": str(world["reward"].pk),
        "runs/<int:pk>": str(run.pk),
        "sampling/<int:pk>": str(world["sampling"].pk),
        "recipes/<int:pk>": str(world["recipe"].pk),
    }
    for prefix, value in values.items():
        route = route.replace(prefix, prefix.split("/")[0] + "/" + value)
    return (
        route.replace("<int:number>", str(version.number))
        .replace("<int:evaluation_id>", str(world["evaluation"].pk))
        .replace("<int:step>", "1")
        .replace("<int:other>", str(run.pk))
        .replace("<slug:key>", world["key"])
        .replace("<str:task_id>", "not-a-task")
        .replace("<int:run_id>", str(run.pk))
        .replace("<str:key>", "final")
        .replace("<slug:action>", "cancel")
        .replace("<int:review_id>", str(world["review"].pk))
        .replace("<int:label_id>", str(world["label"].pk))
        .replace("<int:position>", "0")
    )


def field_names(owner, world) -> list[str]:
    run, version = world["run"], world["version"]
    forms = [
        RunForm(owner=owner),
        DatasetMappingForm(version=version),
        DatasetUploadForm(),
        DatasetHubForm(prefix="hf"),
        EvaluationForm(run=run),
        RejectionJobForm(owner=owner),
    ]
    names = [form.add_prefix(name) for form in forms for name in form.fields]
    return sorted(
        set(
            names
            + EXTRA
            + ["source_code", "entrypoint", "description", "completions", "rows", "dataset_version", "run", "weight"]
        )
    )


def fixed_payloads(names: list[str]) -> list[dict]:
    """The payloads every URL gets: every field missing, then every field the same garbage."""
    return [{}, *({name: value for name in names} for value in GARBAGE)]


QUERY_VALUE_CHARS = 2000


def as_query(payload: dict) -> str:
    """The payload as a GET query, each value cut to ``QUERY_VALUE_CHARS``: longer than any field takes, and 10 times
    cheaper to parse than the POSTed 20,000 (Python's unquote on a 7 MB query took a third of this test's time)."""

    def cut(value):
        return [cut(v) for v in value] if isinstance(value, list) else value[:QUERY_VALUE_CHARS]

    return urlencode({name: cut(value) for name, value in payload.items()}, doseq=True)


def random_payloads(names: list[str], seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(6):  # a random half of the fields, each with its own garbage, and a repeated key
        chosen = rng.sample(names, len(names) // 2)
        out.append(
            {
                name: [rng.choice(GARBAGE), rng.choice(GARBAGE)] if rng.random() < 0.2 else rng.choice(GARBAGE)
                for name in chosen
            }
        )
    return out


@pytest.fixture(autouse=True)
def quick_contract_check(settings):
    settings.GRPO_CONTRACT_CHECK_TIMEOUT = 1  # a form that passes validation does not wait a minute for a worker


def test_no_url_answers_a_server_error_to_garbage(owner_client, owner, world):
    names = field_names(owner, world)
    owner_client.raise_request_exception = False  # a server error is an answer here: collect them all
    failures = []
    routes = [(name, fill(route, world)) for name, route in url_patterns() if name not in SKIPPED]
    assert len(routes) > 40  # the whole URL configuration, not a part of it
    # deletes last: the world's objects they may remove fill the other URLs
    routes.sort(key=lambda route: "_delete" in (route[0] or ""))
    # each query encoded once for the payloads every URL gets, not once per URL
    fixed = [(payload, as_query(payload)) for payload in fixed_payloads(names)]
    for i, (name, url) in enumerate(routes):
        chosen = random_payloads(names, seed=i)
        for payload, query in [*fixed, *((p, as_query(p)) for p in chosen)]:
            for method in ("get", "post"):
                response = (
                    owner_client.get("/" + url, QUERY_STRING=query)
                    if method == "get"
                    else owner_client.post("/" + url, payload)
                )
                if response.status_code >= 500:
                    error = getattr(response, "exc_info", None)
                    failures.append(
                        f"{method.upper()} /{url} {sorted(payload)[:4]}... -> {response.status_code} {error[1]!r:.300}"
                        if error
                        else ""
                    )
    assert not failures, "\n".join(failures[:30])


def test_a_run_form_with_a_reward_but_not_its_version_names_the_field(owner_client, owner, dataset_version):
    reward = RewardFunction.objects.filter(owner=owner).first()
    response = owner_client.post(
        "/runs/new/",
        {
            "name": "r",
            "model": "tiny",
            "dataset_version": dataset_version.pk,
            f"reward_{reward.pk}": "on",
            f"weight_{reward.pk}": "1",
        },
    )
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
