"""The code_tests built-in is a reward a user can pick: on the run form, in a run YAML (open-r1's "code" maps to
it), refused with its reason on a dataset without tests (a `tests` column, or open-r1's `verification_info`)."""

import io
import json

import pytest
from django.urls import reverse
from grpo_web_protocol.demo_data import python_task_rows

from runs.datasets.services import dataset_import
from runs.lifecycle.trl_yaml import parse_run_yaml, run_yaml
from runs.models import Run
from tests.conftest import run_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def tasks(owner):
    data = "".join(json.dumps(r) + "\n" for r in python_task_rows(24, seed=0)).encode()
    return dataset_import(
        owner=owner, name="verifiable-coding-problems-python", stream=io.BytesIO(data), source_name="tasks.jsonl"
    )


def test_the_run_form_offers_code_tests_and_a_run_uses_it_as_a_built_in(owner_client, owner, tasks, tiny_model):
    page = owner_client.get(reverse("run_new")).content.decode()
    assert 'name="builtin_code_tests"' in page
    data = {k: v for k, v in run_form_data(owner).items() if not k.startswith("reward_")}
    data.update(name="code", dataset_version=tasks.pk, builtin_code_tests="on", builtin_code_tests_weight=2.0)
    response = owner_client.post(reverse("run_new"), data)
    assert response.status_code == 302, response.context["form"].errors
    run = Run.objects.get()
    assert run.rewards == [{"name": "code_tests", "weight": 2.0, "builtin": "code_tests"}]
    # its YAML names it, and reads back to the same reward
    again = parse_run_yaml(run_yaml(run), owner=owner)
    assert again.errors == [] and again.rewards == run.rewards


def test_code_tests_on_a_dataset_without_tests_is_refused_naming_it(owner_client, owner, dataset_version, tiny_model):
    data = {k: v for k, v in run_form_data(owner).items() if not k.startswith("reward_")}
    data.update(name="code", dataset_version=dataset_version.pk, builtin_code_tests="on", builtin_code_tests_weight=1.0)
    response = owner_client.post(reverse("run_new"), data)
    assert response.status_code == 400
    assert "code_tests: " in response.content.decode() and "no `tests` column" in response.content.decode()
    assert not Run.objects.exists()


def test_a_dataset_with_open_r1_s_verification_info_takes_code_tests(owner_client, owner, tiny_model):
    # open-r1's code datasets hold their tests as `verification_info`, no `tests` column
    rows = [
        {
            "prompt": f"Read two numbers and print their sum ({i}).",
            "verification_info": {"language": "python", "test_cases": [{"input": "1 2", "output": "3"}]},
        }
        for i in range(8)
    ]
    version = dataset_import(
        owner=owner,
        name="verifiable",
        stream=io.BytesIO("".join(json.dumps(r) + "\n" for r in rows).encode()),
        source_name="verifiable.jsonl",
    )
    data = {k: v for k, v in run_form_data(owner).items() if not k.startswith("reward_")}
    data.update(name="code", dataset_version=version.pk, builtin_code_tests="on", builtin_code_tests_weight=1.0)
    response = owner_client.post(reverse("run_new"), data)
    assert response.status_code == 302, response.content.decode()[-2000:]


def test_open_r1s_code_recipe_maps_its_code_reward_to_code_tests(owner, tasks):
    from tests.lifecycle.test_open_r1_import import SYSTEM

    text = f"""model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
dataset_name: open-r1/verifiable-coding-problems-python
dataset_prompt_column: prompt
system_prompt: "{SYSTEM}"
beta: 0.01
lr_scheduler_type: cosine_with_min_lr
lr_scheduler_kwargs:
  min_lr_rate: 0.1
max_steps: 500
num_generations: 14
per_device_train_batch_size: 16
gradient_accumulation_steps: 4
reward_funcs: [code, format]
reward_weights: [1.0, 0.1]
code_provider: e2b
"""
    imported = parse_run_yaml(text, owner=owner)
    assert imported.errors == []
    assert imported.rewards[0] == {"name": "code_tests", "weight": 1.0, "builtin": "code_tests"}
    assert imported.rewards[1]["name"] == "format" and imported.rewards[1]["weight"] == 0.1
    assert any("mapped to grpo-web's 'code_tests'" in n for n in imported.notes)
    assert imported.config["lr_scheduler_type"] == "cosine_with_min_lr"
    assert imported.extra["lr_scheduler_kwargs"] == {"min_lr_rate": 0.1}
    assert "tests" in imported.dataset_version.reward_columns
