"""What the config import knows about keys (runs.lifecycle.trl_yaml): the keys grpo-web sets itself, reads as script
arguments, does not apply (each with what happens instead), translates or renames, and the result of an import,
ImportedRun. No database here."""

from __future__ import annotations

from dataclasses import dataclass, field

from grpo_web_protocol.config import TOKEN_FIELDS

from rewards.library import NAMES as LIBRARY_NAMES
from rewards.library import OPEN_R1, OUMI
from runs.models import DatasetVersion

# Set by grpo-web for every run (workers/training/train.py), so an imported value would be overridden anyway.
MANAGED = {
    "output_dir",
    "logging_steps",
    "logging_strategy",
    "report_to",
    "save_strategy",
    "disable_tqdm",
    "use_cpu",
    "dataloader_num_workers",
    "run_name",
    "logging_dir",
    "overwrite_output_dir",
}
# TRL script arguments (ScriptArguments / ModelConfig) and open-r1's recipe keys that grpo-web reads.
SCRIPT_KEYS = {
    "model_name_or_path",
    "model",
    "dataset_name",
    "dataset_version",
    "reward_funcs",
    "reward_versions",
    "requested_gpus",
    "name",
    "reward_weights",
    "system_prompt",
    "dataset_prompt_column",
    "dataset_train_split",
    "dataset_test_split",
    "trainer",
    "engine",
    "num_workers",
    "tools",
    "environment",
    "token_sample_groups",
}
# Keys grpo-web does not apply, each with what happens instead (a note never claims grpo-web sets what it does not).
NOT_APPLIED = {
    **dict.fromkeys(
        (
            "push_to_hub",
            "hub_model_id",
            "hub_strategy",
            "hub_private_repo",
            "hub_token",
            "hub_revision",
            "hub_always_push",
            "hub_model_revision",
        ),
        "grpo-web keeps the model on its worker and pushes nothing to the Hub; the run page downloads it",
    ),
    **dict.fromkeys(
        ("torch_dtype", "dtype", "attn_implementation", "model_revision", "trust_remote_code"),
        "not applied: the worker loads the model folder with transformers' defaults",
    ),
    **dict.fromkeys(
        ("dataset_config", "dataset_configs", "dataset_mixture"),
        "not applied: grpo-web trains on the dataset version named by dataset_name (pick the Hub config "
        "when importing the dataset)",
    ),
    "chat_template": "not applied: the model's own chat template formats conversational prompts",
    "empty_device_cache_steps": "transformers 5 removed it; not applied",
    **dict.fromkeys(
        ("wandb_entity", "wandb_project", "wandb_run_group", "wandb_run_id", "wandb_log_unique_prompts"),
        "Weights & Biases settings; not applied: grpo-web reports to no tracker, the run page draws the metrics",
    ),
    **dict.fromkeys(
        ("remote_gen_model_url", "remote_gen_model_n_gpus", "remote_gen_model_provider"),
        "open-r1's remote generation server; not applied: the run generates in its own process (or with "
        "use_vllm on its worker's GPUs)",
    ),
    **dict.fromkeys(
        ("eval_strategy", "do_eval", "per_device_eval_batch_size", "eval_on_start", "eval_accumulation_steps"),
        "not applied: TRL's evaluation needs a separate eval dataset and knows no pass@k; grpo-web "
        "evaluates on the dataset version's eval split every eval_steps steps itself",
    ),
    **dict.fromkeys(
        ("callbacks", "benchmarks"),
        "open-r1's own hooks; not applied (the run's evaluations measure mean@k, pass@k and maj@k on the eval split)",
    ),
    **dict.fromkeys(
        (
            "code_language",
            "code_provider",
            "parallel_code_exec_per_proc",
            "e2b_router_url",
            "morph_router_url",
            "code_eval_test_batch_size",
            "code_eval_scoring_mode",
            "ioi_provider",
            "enforce_same_language",
        ),
        "open-r1's code-execution provider; not applied: code_tests runs each test in grpo-web's sandbox",
    ),
    **dict.fromkeys(
        (
            "lora_modules_to_save",
            "lora_task_type",
            "use_rslora",
            "use_dora",
            "load_in_4bit",
            "load_in_8bit",
            "use_bnb_nested_quant",
            "bnb_4bit_quant_type",
        ),
        "not applied: grpo-web's LoRA takes use_peft, lora_r, lora_alpha, lora_dropout and "
        "lora_target_modules (full precision, no quantisation)",
    ),
}
# open-r1's reward parameters: grpo-web's copy of that reward keeps each as a constant in its code.
REWARD_PARAMETERS = {
    "cosine_min_value_wrong": ("cosine", "MIN_VALUE_WRONG"),
    "cosine_max_value_wrong": ("cosine", "MAX_VALUE_WRONG"),
    "cosine_min_value_correct": ("cosine", "MIN_VALUE_CORRECT"),
    "cosine_max_value_correct": ("cosine", "MAX_VALUE_CORRECT"),
    "cosine_max_len": ("cosine", "MAX_LEN"),
    "repetition_n_grams": ("repetition_penalty", "NGRAM_SIZE"),
    "repetition_max_penalty": ("repetition_penalty", "MAX_PENALTY"),
}
# Fields newer TRL or transformers removed or renamed: each translated, with a note that says what changed.
RENAMED = {"warmup_ratio", "max_prompt_length", "vllm_device", "num_train_epochs", "num_processes"}
# Older TRL names of SFTConfig fields (an SFT run takes them under the new name, with a note)
SFT_RENAMED = {"max_seq_length": "max_length", "use_liger": "use_liger_kernel"}
# Fields transformers reads as a fraction of the run's steps when below 1 (TrainerState.compute_steps)
FRACTIONAL = {"save_steps", "eval_steps"}
# open-r1 reward names whose grpo-web built-in goes by another name.
REWARD_ALIASES = {"code": "code_tests"}
LIBRARY = set(LIBRARY_NAMES) | set(OPEN_R1) | set(OUMI)


@dataclass
class ImportedRun:
    name: str = ""
    model: str = "tiny"
    dataset_version: DatasetVersion | None = None
    rewards: list[dict] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)  # TRL's tools: {name, builtin} or {name, version_id, version}
    environment: dict = field(default_factory=dict)  # TRL's environment_factory: as a tool, or {} for none
    config: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    evaluation: dict = field(default_factory=dict)  # grpo_web_protocol.config.EvalFields
    requested_gpus: int = 0
    engine: str = "local"  # local, or ray: trained on a worker's Ray cluster (docs/ray.md)
    num_workers: int = 1  # Ray Train workers of a Ray run
    kind: str = "grpo"  # the ``trainer`` key: grpo or sft
    trainer: str = "trl"  # ``trainer: verl``: a GRPO run that trains with verl
    token_sample_groups: int = TOKEN_FIELDS["token_sample_groups"].default  # grpo-web's own, for the token view
    sources: dict = field(default_factory=dict)  # each config field: where its value came from (config.SOURCES)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
