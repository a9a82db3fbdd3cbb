"""The config diff shows only what differs: model, dataset version, reward versions and weights, GRPOConfig fields."""

import io

import pytest
from django.urls import reverse
from grpo_web_protocol.config import GRPO_FIELDS

from rewards.models import RewardFunction, RewardFunctionVersion
from runs.lifecycle.config_diff import config_diff, config_table
from runs.models import DatasetVersion, Run

pytestmark = pytest.mark.django_db


def _pinned(owner, name, number=1, weight=1.0):
    function = RewardFunction.objects.get(owner=owner, name=name)
    version = function.versions.get(number=number)
    return {"name": name, "weight": weight, "version_id": version.pk, "version": number}


def _run(owner, dataset_version, name="r", *, model="tiny", rewards=None, config=None):
    return Run.objects.create(
        owner=owner,
        name=name,
        model=model,
        dataset_version=dataset_version,
        rewards=rewards or [_pinned(owner, "accuracy")],
        config=config or {"learning_rate": 0.01, "num_generations": 8},
        total_steps=3,
    )


@pytest.fixture
def accuracy_v2(owner):
    function = RewardFunction.objects.get(owner=owner, name="accuracy")
    return RewardFunctionVersion.objects.create(
        function=function, number=2, source="def f(completions, **kw): ...", entrypoint="f"
    )


@pytest.fixture
def second_version(dataset_version):
    return DatasetVersion.objects.create(
        dataset=dataset_version.dataset,
        number=2,
        path=dataset_version.path,
        columns=dataset_version.columns,
        row_count=dataset_version.row_count,
    )


def test_identical_setups_have_no_diff(owner, dataset_version):
    assert config_diff(_run(owner, dataset_version, "a"), _run(owner, dataset_version, "b")) == []


def test_it_lists_only_the_fields_that_differ_in_display_order(owner, dataset_version, accuracy_v2, second_version):
    a = _run(
        owner,
        dataset_version,
        "a",
        rewards=[_pinned(owner, "accuracy"), _pinned(owner, "digit_ratio")],
        config={"learning_rate": 0.01, "num_generations": 8, "beta": 0.0},
    )
    b = _run(
        owner,
        second_version,
        "b",
        model="Qwen/Qwen2.5-0.5B-Instruct",
        rewards=[
            _pinned(owner, "think_format", weight=0.5),
            _pinned(owner, "accuracy", 2),
            _pinned(owner, "digit_ratio", weight=2.0),
        ],
        config={"learning_rate": 1e-3, "num_generations": 8, "beta": 0.04},
    )
    assert config_diff(a, b) == [
        {"field": "model", "kind": "model", "a": "tiny", "b": "Qwen/Qwen2.5-0.5B-Instruct"},
        {"field": "dataset_version", "kind": "dataset", "a": "arithmetic v1", "b": "arithmetic v2"},
        {"field": "accuracy version", "kind": "reward", "a": "v1", "b": "v2"},
        {"field": "digit_ratio weight", "kind": "reward", "a": 1.0, "b": 2.0},
        {"field": "think_format version", "kind": "reward", "a": None, "b": "v1"},
        {"field": "think_format weight", "kind": "reward", "a": None, "b": 0.5},
        *sorted(
            [
                {"field": "learning_rate", "kind": "config", "a": 0.01, "b": 0.001},
                {"field": "beta", "kind": "config", "a": 0.0, "b": 0.04},
            ],
            key=lambda row: list(GRPO_FIELDS).index(row["field"]),
        ),  # GRPOConfig fields in the form's order
    ]


def test_a_field_a_run_did_not_store_counts_as_its_default(owner, dataset_version):
    default = GRPO_FIELDS["temperature"].default
    a = _run(owner, dataset_version, "a", config={"learning_rate": 0.01})
    b = _run(owner, dataset_version, "b", config={"learning_rate": 0.01, "temperature": default})
    assert config_diff(a, b) == []
    c = _run(owner, dataset_version, "c", config={"learning_rate": 0.01, "temperature": default + 0.5})
    assert config_diff(a, c) == [{"field": "temperature", "kind": "config", "a": default, "b": default + 0.5}]


def test_a_version_id_without_its_number_is_looked_up(owner, dataset_version, accuracy_v2):
    old_style = [{"name": "accuracy", "weight": 1.0, "version_id": accuracy_v2.pk}]  # saved before "version"
    a = _run(owner, dataset_version, "a")
    b = _run(owner, dataset_version, "b", rewards=old_style)
    assert config_diff(a, b) == [{"field": "accuracy version", "kind": "reward", "a": "v1", "b": "v2"}]


def test_datasets_of_the_same_name_and_number_still_differ(owner, dataset_version):
    from runs.datasets.services import dataset_import

    # a second upload named "arithmetic": its own dataset, also v1
    other = dataset_import(
        owner=owner, name="arithmetic", stream=io.BytesIO(b'{"prompt": "1 + 1?"}\n'), source_name="again.jsonl"
    )
    diff = config_diff(_run(owner, dataset_version, "a"), _run(owner, other, "b"))
    assert [(d["field"], d["a"], d["b"]) for d in diff] == [("dataset_version", "arithmetic v1", "arithmetic v1")]


def test_the_table_of_several_runs_keeps_rows_where_any_run_differs(owner, dataset_version):
    runs = [
        _run(owner, dataset_version, "a"),
        _run(owner, dataset_version, "b"),
        _run(owner, dataset_version, "c", config={"learning_rate": 0.05, "num_generations": 8}),
    ]
    assert config_table(runs) == [{"field": "learning_rate", "kind": "config", "values": [0.01, 0.01, 0.05]}]


def test_the_compare_page_shows_the_diff(owner_client, owner, dataset_version):
    a = _run(owner, dataset_version, "a")
    b = _run(owner, dataset_version, "b", config={"learning_rate": 0.05, "num_generations": 4})
    response = owner_client.get(reverse("run_compare"), {"runs": f"{a.pk},{b.pk}"})
    assert response.status_code == 200
    rows = response.context["config_rows"]
    assert sorted(r["field"] for r in rows) == ["learning_rate", "num_generations"]
    html = response.content.decode()
    assert 'data-field="learning_rate"' in html and 'data-field="model"' not in html
