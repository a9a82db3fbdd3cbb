"""The field's GRPO recipes import as they are: open-r1's Qwen2.5 demo, a Qwen2.5-Math simple-RL recipe and an R1-Zero
recipe, shaped as open-r1 writes them (TRL-script and open-r1 keys, open-r1's reward names, fields newer TRL and
transformers removed). Each becomes a run the tiny model trains, with the dataset and rewards mapped; every key that
is not applied says so and why."""

import io
import json

import pytest
from grpo_web_protocol.demo_data import arithmetic_rows

from runs.datasets.services import dataset_import
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.lifecycle.trl_yaml import parse_run_yaml
from runs.models import Run
from tests.conftest import wait_for

SYSTEM = (
    "You are a helpful AI Assistant that provides well-reasoned and detailed responses. You first think about "
    "the reasoning process as an internal monologue and then provide the user with the answer. Respond in the "
    "following format: <think>\\n...\\n</think>\\n<answer>\\n...\\n</answer>"
)

# open-r1's recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml, as published
QWEN_DEMO = f"""# Model arguments
model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
model_revision: main
torch_dtype: bfloat16
attn_implementation: flash_attention_2

# Data training arguments
dataset_name: open-r1/OpenR1-Math-220k
dataset_prompt_column: problem
system_prompt: "{SYSTEM}"

# GRPO trainer config
bf16: true
use_vllm: true
do_eval: false
gradient_accumulation_steps: 4
gradient_checkpointing: true
gradient_checkpointing_kwargs:
  use_reentrant: false
hub_model_id: Qwen2.5-1.5B-Open-R1-GRPO
hub_strategy: every_save
learning_rate: 2.0e-05
log_completions: true
log_level: info
logging_first_step: true
logging_steps: 1
logging_strategy: steps
lr_scheduler_type: cosine
max_prompt_length: 512
max_completion_length: 1024
max_steps: -1
num_generations: 16
num_train_epochs: 1
output_dir: data/Qwen2.5-1.5B-Open-R1-GRPO
overwrite_output_dir: true
per_device_eval_batch_size: 16
per_device_train_batch_size: 16
push_to_hub: true
report_to:
- wandb
reward_funcs:
- accuracy
- format
- tag_count
reward_weights:
- 1.0
- 1.0
- 1.0
save_strategy: "epoch"
save_total_limit: 1
seed: 42
warmup_ratio: 0.1
"""

# a Qwen2.5-Math simple-RL recipe as open-r1's older recipes wrote it (vllm_device, dataset_configs, cosine)
QWEN_MATH_SIMPLE_RL = f"""model_name_or_path: Qwen/Qwen2.5-Math-7B
torch_dtype: bfloat16
dataset_name: DigitalLearningGmbH/MATH-lighteval
dataset_configs:
- default
dataset_prompt_column: problem
system_prompt: "{SYSTEM}"
num_processes: 7
bf16: true
use_vllm: true
vllm_device: auto
vllm_gpu_memory_utilization: 0.7
do_eval: true
eval_strategy: steps
eval_steps: 100
gradient_accumulation_steps: 8
gradient_checkpointing: true
learning_rate: 3.0e-06
lr_scheduler_type: cosine
max_prompt_length: 512
max_completion_length: 1024
max_steps: -1
num_generations: 7
num_train_epochs: 1
per_device_train_batch_size: 2
reward_funcs: [accuracy, format, cosine, repetition_penalty]
reward_weights: [1.0, 1.0, 1.0, 1.0]
cosine_max_len: 1000
repetition_n_grams: 3
repetition_max_penalty: -1.0
push_to_hub: false
report_to: [wandb]
seed: 42
warmup_ratio: 0.1
"""

# R1-Zero: GRPO alone on a base model, accuracy and format, with LoRA as many run it on one GPU
R1_ZERO = """model_name_or_path: Qwen/Qwen2.5-Math-1.5B
dataset_name: open-r1/OpenR1-Math-220k
dataset_prompt_column: problem
reward_funcs: [accuracy, format, tag_count, reasoning_steps, length]
beta: 0.0
learning_rate: 1.0e-06
num_generations: 8
per_device_train_batch_size: 8
max_completion_length: 2048
max_steps: 200
use_peft: true
lora_r: 16
lora_alpha: 32
lora_target_modules: [q_proj, k_proj, v_proj, o_proj]
"""

RECIPES = {"qwen_demo": QWEN_DEMO, "qwen_math_simple_rl": QWEN_MATH_SIMPLE_RL, "r1_zero": R1_ZERO}
MATH_ROWS = [
    {"problem": r["prompt"], "solution": f"Adding or subtracting gives \\boxed{{{r['answer']}}}."}
    for r in arithmetic_rows(48)
]


def _datasets(owner):
    data = "".join(json.dumps(r) + "\n" for r in MATH_ROWS).encode()
    for name in ("OpenR1-Math-220k", "MATH-lighteval"):
        dataset_import(
            owner=owner, name=name, stream=io.BytesIO(data), source_name=f"{name}.jsonl", prompt_column="problem"
        )


@pytest.mark.django_db
@pytest.mark.parametrize("recipe", RECIPES)
def test_a_recipe_imports_with_every_key_applied_or_explained(owner, recipe):
    _datasets(owner)
    imported = parse_run_yaml(RECIPES[recipe], owner=owner)
    assert imported.errors == []
    notes = {n.split(":", 1)[0]: n for n in imported.notes}
    # the dataset is mapped as the recipe asks: the prompt column, after the system prompt, as chat messages
    version = imported.dataset_version
    assert version.prompt_column == "problem" and "solution" in version.reward_columns
    if "system_prompt" in RECIPES[recipe]:
        assert version.prompt_format == "conversational" and version.system_prompt.startswith("You are a helpful")
    # open-r1's reward names are grpo-web built-ins of the same names, copied for the user
    names = [r["name"] for r in imported.rewards]
    assert names == parse_names(RECIPES[recipe])
    assert "reward_funcs" in notes and "made your copy of the library's 'format' reward" in " ".join(imported.notes)
    # fields newer transformers and TRL removed are translated, with what changed
    if "warmup_ratio" in RECIPES[recipe]:
        assert imported.extra["warmup_steps"] == 0.1 and "transformers 5 removed it" in notes["warmup_ratio"]
    if "max_prompt_length" in RECIPES[recipe]:
        assert "TRL 1.x removed it" in notes["max_prompt_length"]
    if "max_steps: -1" in RECIPES[recipe]:
        G, B, GA = (
            imported.config[k]
            for k in ("num_generations", "per_device_train_batch_size", "gradient_accumulation_steps")
        )
        assert imported.config["max_steps"] == -(-48 // max(1, B * GA * max(1, imported.requested_gpus) // G))
    if "vllm_device" in RECIPES[recipe]:
        assert imported.config["vllm_mode"] == "server" and "TRL removed it" in notes["vllm_device"]
    if "use_peft" in RECIPES[recipe]:  # LoRA under TRL's ModelConfig names
        assert imported.config["use_peft"] is True and imported.config["lora_r"] == 16
        assert imported.config["lora_target_modules"] == "q_proj,k_proj,v_proj,o_proj"
    # nothing claims grpo-web set what it does not
    for key in ("push_to_hub", "hub_model_id", "use_peft", "lora_r", "torch_dtype", "attn_implementation"):
        if key in notes:
            assert "set by grpo-web" not in notes[key], notes[key]
    for key in ("output_dir", "report_to", "logging_steps"):
        if key in notes:
            assert "set by grpo-web for every run" in notes[key]


def parse_names(text: str) -> list[str]:
    import yaml

    return list(yaml.safe_load(text)["reward_funcs"])


@pytest.mark.django_db
def test_importing_twice_reuses_the_mapped_version_and_the_copies(owner):
    _datasets(owner)
    first = parse_run_yaml(QWEN_DEMO, owner=owner)
    again = parse_run_yaml(QWEN_DEMO, owner=owner)
    assert again.dataset_version == first.dataset_version
    assert [r["version_id"] for r in again.rewards] == [r["version_id"] for r in first.rewards]
    assert not any("made" in n for n in again.notes)


@pytest.mark.django_db
def test_a_prompt_column_the_dataset_lacks_is_named(owner):
    _datasets(owner)
    imported = parse_run_yaml(
        QWEN_DEMO.replace("dataset_prompt_column: problem", "dataset_prompt_column: question"), owner=owner
    )
    assert any(
        e.startswith("dataset_prompt_column: OpenR1-Math-220k has no column 'question'") for e in imported.errors
    )


@pytest.mark.django_db(transaction=True)
def test_each_imported_recipe_trains_the_tiny_model(celery_worker, owner):
    _datasets(owner)
    runs = []
    for name, text in RECIPES.items():
        imported = parse_run_yaml(
            text.replace(
                text.split("\n")[0] if name != "qwen_demo" else "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct",
                "model_name_or_path: tiny",
            ),
            owner=owner,
        )
        assert imported.errors == [] and imported.model == "tiny"
        # shrunk to fit a CPU in seconds; everything else as imported
        config = {
            **imported.config,
            "num_generations": 4,
            "per_device_train_batch_size": 8,
            "gradient_accumulation_steps": 1,
            "max_completion_length": 16,
            "max_steps": 1,
            "use_vllm": False,
            "bf16": "no",
            "save_steps": 0,
        }
        runs.append(
            run_create(
                owner=owner,
                spec=RunSpec(
                    name=name,
                    model="tiny",
                    dataset_version=imported.dataset_version,
                    rewards=imported.rewards,
                    config=config,
                    config_extra=imported.extra,
                    evaluation={**imported.evaluation, "eval_steps": 0},
                ),
            )
        )
    wait_for(lambda: all(r.refresh_from_db() or r.is_finished for r in runs), timeout=300, what="the imported runs")
    for run in runs:
        assert run.status == Run.Status.COMPLETED, (run.name, run.error, run.log_tail[-2000:])
        assert run.rollouts.count() == 8
        first = run.rollouts.order_by("index").first()
        assert first.columns["solution"].endswith("}.")  # open-r1's gold column reached the rewards
        if run.name == "r1_zero":  # the LoRA run: merged final model and the adapter beside it
            assert (run.run_dir / "output" / "adapter" / "adapter_config.json").is_file()
            assert (run.run_dir / "output" / "final" / "config.json").is_file()
        else:
            assert first.prompt.startswith("[{") or "system" in first.prompt  # chat messages with the system prompt
