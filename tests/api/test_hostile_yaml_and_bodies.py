"""Run YAML, JSON bodies and recipes within limits (issue 30, item 8): an alias bomb, nesting past the limit and a
recipe of thousands of stages are refused at once with a message naming what is wrong; nothing is saved, no 500.
Aliases within the limits still work, as in published configs."""

import json

import pytest

from runs.models import Recipe, Run
from runs.safe_yaml import MAX_DEPTH, MAX_VALUES, load_yaml

pytestmark = pytest.mark.django_db

# a "billion laughs": nine levels of ten aliases each, 10^9 values from under 500 bytes
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)
)


def test_an_alias_bomb_is_refused_naming_its_line():
    assert len(BOMB) < 600
    with pytest.raises(Exception, match=f"expands to more than {MAX_VALUES:,} values"):
        load_yaml(BOMB)


def test_aliases_within_the_limit_load_as_yaml_loads_them():
    text = "base: &lr 0.0001\nlearning_rate: *lr\nlist: &l [1, 2]\nagain: *l\n"
    assert load_yaml(text) == {"base": 0.0001, "learning_rate": 0.0001, "list": [1, 2], "again": [1, 2]}


def test_yaml_nested_past_the_limit_is_refused():
    with pytest.raises(Exception, match=f"nests deeper than {MAX_DEPTH} levels"):
        load_yaml("x: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_the_api_refuses_an_alias_bomb_run_yaml_and_saves_nothing(owner_api, dataset_version):
    body = {"yaml": "model_name_or_path: tiny\ndataset_name: arithmetic\n" + BOMB}
    response = owner_api.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 400
    assert "expands to more than" in " ".join(response.json()["errors"])
    assert not Run.objects.exists()


def test_the_api_refuses_a_config_nested_900_deep(owner_api, dataset_version):
    deep: dict = {}
    for _ in range(900):
        deep = {"x": deep}
    body = json.dumps({"config": {"model_name_or_path": "tiny", "dataset_name": "arithmetic", "extra": deep}})
    response = owner_api.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["errors"] == [f"config: nested deeper than {MAX_DEPTH} levels"]
    assert not Run.objects.exists()


def test_a_recipe_of_twenty_thousand_stages_is_refused_at_once(owner_api, dataset_version):
    stages = [{"kind": "sft", "dataset": dataset_version.pk}] * 20_000
    response = owner_api.post("/api/recipes", {"name": "huge", "stages": stages}, content_type="application/json")
    assert response.status_code == 400
    assert "at most 32 stages; this one has 20000" in " ".join(response.json()["errors"])
    assert not Recipe.objects.exists()


def test_a_json_body_past_the_limit_is_a_json_error(owner_api, settings):
    body = json.dumps({"yaml": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10)})
    response = owner_api.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 413 and response["Content-Type"].startswith("application/json")
    assert "the request body is larger than" in response.json()["errors"][0]
    assert not Run.objects.exists()
