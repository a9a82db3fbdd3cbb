"""TRL's GRPOConfig, every field, as data the web process can read without importing TRL (and torch):
``grpo_config.json`` beside this file, written from the installed TRL by ``python -m workers.training.trl_schema --write``
(tests/lifecycle/test_grpo_schema.py compares the two). Each field: name, kind (bool, int, float, str, json),
default, help, choices, and the group TRL's docs document it under ("TrainingArguments" for inherited ones)."""

from __future__ import annotations

import json
from pathlib import Path

INHERITED = "TrainingArguments"  # the group of the fields GRPOConfig inherits (workers.training.trl_schema)
GRPO_SCHEMA: list[dict] = json.loads((Path(__file__).with_name("grpo_config.json")).read_text())


def grpo_config_fields() -> frozenset[str]:
    """The names of GRPOConfig's fields (read at call time: a test may swap GRPO_SCHEMA for a newer TRL's)."""
    return frozenset(f["name"] for f in GRPO_SCHEMA)


def schema_field(name: str) -> dict | None:
    return next((f for f in GRPO_SCHEMA if f["name"] == name), None)


GRPO_CONFIG_FIELDS = grpo_config_fields()


# The field names of TRL's SFTConfig (TRL 1.16), for SFT runs; tests/lifecycle/test_sft_runs.py compares it with the
# installed TRL.
SFT_CONFIG_FIELDS = frozenset({
    "accelerator_config", "activation_checkpointing", "activation_checkpointing_kwargs", "activation_offloading",
    "adam_beta1", "adam_beta2", "adam_epsilon", "assistant_only_loss", "auto_find_batch_size",
    "average_tokens_across_devices", "batch_eval_metrics", "bf16", "bf16_full_eval", "chat_template_path",
    "completion_only_loss", "data_seed", "dataloader_drop_last", "dataloader_in_order",
    "dataloader_multiprocessing_context", "dataloader_num_workers", "dataloader_persistent_workers",
    "dataloader_pin_memory", "dataloader_prefetch_factor", "dataset_kwargs", "dataset_num_proc",
    "dataset_text_field", "ddp_backend", "ddp_broadcast_buffers", "ddp_bucket_cap_mb", "ddp_find_unused_parameters",
    "ddp_static_graph", "ddp_timeout", "debug", "deepspeed", "disable_tqdm", "do_eval", "do_predict", "do_train",
    "enable_jit_checkpoint", "eos_token", "eval_accumulation_steps", "eval_delay", "eval_do_concat_batches",
    "eval_on_start", "eval_packing", "eval_steps", "eval_strategy", "eval_use_gather_object", "fp16",
    "fp16_full_eval", "fsdp", "fsdp_config", "full_determinism", "gradient_accumulation_steps",
    "gradient_checkpointing", "gradient_checkpointing_kwargs", "greater_is_better", "hub_always_push",
    "hub_model_id", "hub_private_repo", "hub_revision", "hub_strategy", "hub_token", "ignore_data_skip",
    "include_for_metrics", "include_num_input_tokens_seen", "label_names", "label_smoothing_factor",
    "learning_rate", "length_column_name", "liger_kernel_config", "load_best_model_at_end", "local_rank",
    "log_level", "log_level_replica", "log_on_each_node", "logging_first_step", "logging_nan_inf_filter",
    "logging_steps", "logging_strategy", "loss_type", "lr_scheduler_kwargs", "lr_scheduler_type", "max_grad_norm",
    "max_length", "max_steps", "metric_for_best_model", "model_init_kwargs", "neftune_noise_alpha",
    "num_train_epochs", "optim", "optim_args", "optim_target_modules", "output_dir", "packing", "packing_strategy",
    "pad_to_multiple_of", "pad_token", "padding_free", "parallelism_config", "per_device_eval_batch_size",
    "per_device_train_batch_size", "prediction_loss_only", "project", "push_to_hub", "remove_unused_columns",
    "report_to", "restore_callback_states_from_checkpoint", "resume_from_checkpoint", "router_aux_loss_coef",
    "run_name", "save_on_each_node", "save_only_model", "save_steps", "save_strategy", "save_total_limit", "seed",
    "shuffle_dataset", "skip_memory_metrics", "tf32", "torch_compile", "torch_compile_backend",
    "torch_compile_mode", "torch_empty_cache_steps", "trackio_bucket_id", "trackio_space_id",
    "trackio_static_space_id", "train_sampling_strategy", "truncation_mode", "trust_remote_code", "use_cache",
    "use_cpu", "use_liger_kernel", "warmup_steps", "weight_decay",
})
