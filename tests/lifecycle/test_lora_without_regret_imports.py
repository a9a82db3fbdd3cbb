"""TRL's "LoRA Without Regret" GRPO command (huggingface/trl docs/source/lora_without_regret.md, the "local" tab), its
flags as the YAML file ``trl grpo --config`` reads, imports with no refusal over its generation batch (16 generations,
one completion per device step, 8 accumulation steps, generation_batch_size 16: TRL trains it with 16 steps per
generation), by the import every route shares and by the run form it fills. Hub ids are the local tiny model and
dataset; the reward is a built-in."""

import pytest
import yaml

from runs.lifecycle.trl_yaml import parse_run_yaml
from tests.lifecycle.test_run_spec_paths import by_api, by_form

pytestmark = pytest.mark.django_db

COMMAND = """
--model_name_or_path Qwen/Qwen3-0.6B --dataset_name HuggingFaceH4/OpenR1-Math-220k-default-verified
--output_dir grpo-full-qwen3-0.6b --learning_rate 1.0e-6 --lr_scheduler_type cosine --warmup_ratio 0.0
--max_grad_norm 1.0 --beta 0.0 --max_completion_length 4096 --num_generations 16 --generation_batch_size 16
--gradient_accumulation_steps 8 --per_device_train_batch_size 1 --num_train_epochs 1 --lora_r 1 --lora_alpha 32
--lora_dropout 0.0 --lora_target_modules all-linear --vllm_mode colocate --save_strategy steps --save_steps 50
--save_total_limit 1 --logging_steps 1 --max_steps 200 --report_to trackio
"""


def _file() -> str:
    words = COMMAND.split()
    data = {words[i][2:]: yaml.safe_load(words[i + 1]) for i in range(0, len(words), 2)}
    data.update(model_name_or_path="tiny", dataset_name="arithmetic", reward_funcs=["digit_ratio"])
    # a GPU run, queued anyway: no worker of the test session serves the GPU queue, so it is not trained
    data["requested_gpus"] = 1
    return yaml.safe_dump(data)


def _about_the_batch(errors) -> list[str]:
    return [e for e in errors if "generation" in e or "per_device_train_batch_size" in e]


def test_the_command_imports_without_a_generation_batch_refusal(owner, dataset_version):
    imported = parse_run_yaml(_file(), owner=owner)
    assert _about_the_batch(imported.errors) == [], imported.errors
    assert imported.extra.get("generation_batch_size") == 16


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", ["form", "api"])
def test_the_command_makes_a_run_by_the_form_and_the_api(celery_worker, client, owner, dataset_version, route):
    client.force_login(owner)
    run = by_form(client, _file()) if route == "form" else by_api(owner, _file())
    assert run.config["num_generations"] == 16 and run.config["gradient_accumulation_steps"] == 8
    assert run.config_extra["generation_batch_size"] == 16
