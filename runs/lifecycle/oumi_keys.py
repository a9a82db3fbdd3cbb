"""Oumi's config keys (oumi-ai/oumi d8ed0777 and oumi 0.9 on PyPI, src/oumi/core/configs/params/*): each dataclass's
fields, and where Oumi's own mapping (TrainingParams.to_hf, VerlGrpoTrainer._create_config) passes each training key. Read by
runs.lifecycle.oumi_yaml. No database here."""

from __future__ import annotations

TRAINERS = {"TRL_GRPO": "grpo", "VERL_GRPO": "verl", "TRL_SFT": "sft"}
SECTIONS = ("model", "data", "training", "peft", "fsdp", "deepspeed")

# Oumi's dataclasses' fields (oumi.core.configs.params.*): a key outside them is refused, as Oumi's OmegaConf schema does
MODEL_KEYS = frozenset(
    "model_name adapter_model tokenizer_name tokenizer_pad_token tokenizer_kwargs processor_kwargs model_max_length "
    "load_pretrained_weights trust_remote_code torch_dtype_str compile chat_template chat_template_kwargs "
    "attn_implementation device_map model_kwargs enable_liger_kernel shard_for_eval freeze_layers model_revision "
    "tool_call_parser adapter_trainable text_only".split()
)
SPLIT_KEYS = frozenset(
    "datasets collator_name collator_kwargs train_target pack stream target_col mixture_strategy seed "
    "use_torchdata".split()
)
DATASET_KEYS = frozenset(
    "dataset_name dataset_path subset split dataset_kwargs sample_count mixture_proportion shuffle seed "
    "shuffle_buffer_size trust_remote_code transform_num_workers".split()
)
TRAINING_KEYS = frozenset(
    "use_peft trainer_type enable_gradient_checkpointing gradient_checkpointing_kwargs output_dir "
    "per_device_train_batch_size per_device_eval_batch_size gradient_accumulation_steps max_steps num_train_epochs "
    "save_epoch save_steps save_final_model seed data_seed use_deterministic full_determinism run_name "
    "metrics_function reward_functions reward_function_kwargs grpo gkd gold log_level dep_log_level log_examples "
    "enable_wandb enable_mlflow enable_tensorboard logging_strategy logging_dir logging_steps logging_first_step "
    "eval_strategy eval_steps learning_rate lr_scheduler_type lr_scheduler_kwargs warmup_ratio warmup_steps optimizer "
    "weight_decay adam_beta1 adam_beta2 adam_epsilon sgd_momentum mixed_precision_dtype compile "
    "include_performance_metrics include_alternative_mfu_metrics log_model_summary resume_from_checkpoint "
    "try_resume_from_last_checkpoint dataloader_num_workers dataloader_persistent_workers dataloader_prefetch_factor "
    "dataloader_main_process_only ddp_find_unused_parameters max_grad_norm trainer_kwargs verl_config_overrides "
    "profiler telemetry empty_device_cache_steps nccl_default_timeout_minutes label_ignore_index".split()
)
GRPO_KEYS = frozenset(
    "model_init_kwargs max_prompt_length max_completion_length num_generations temperature remove_unused_columns "
    "repetition_penalty use_vllm vllm_mode vllm_gpu_memory_utilization epsilon log_completions rollout_function".split()
)
PEFT_KEYS = frozenset(
    "lora_r lora_alpha lora_dropout lora_target_modules lora_exclude_modules lora_target_parameters "
    "lora_modules_to_save lora_bias lora_init_weights lora_task_type q_lora q_lora_bits bnb_4bit_quant_type "
    "llm_int8_skip_modules use_bnb_nested_quant bnb_4bit_quant_storage bnb_4bit_compute_dtype peft_save_mode".split()
)
FSDP_KEYS = frozenset(
    "enable_fsdp sharding_strategy cpu_offload mixed_precision backward_prefetch forward_prefetch use_orig_params "
    "state_dict_type auto_wrap_policy min_num_params transformer_layer_cls sync_module_states".split()
)
DEEPSPEED_KEYS = frozenset(
    "enable_deepspeed deepspeed_config_path zero_stage offload_optimizer offload_param precision overlap_comm "
    "contiguous_gradients reduce_bucket_size allgather_bucket_size allgather_partitions reduce_scatter "
    "round_robin_gradients stage3_prefetch_bucket_size stage3_param_persistence_threshold stage3_max_live_parameters "
    "stage3_max_reuse_distance stage3_gather_16bit_weights_on_model_save sub_group_size train_batch_size "
    "train_micro_batch_size_per_gpu gradient_accumulation_steps gradient_clipping zero_allow_untested_optimizer "
    "zero_force_ds_cpu_optimizer activation_checkpointing memory_efficient_linear steps_per_print "
    "wall_clock_breakdown".split()
)

# TrainingParams fields to_hf passes to TRL's config under the same name
SAME_NAME = (
    "per_device_train_batch_size",
    "per_device_eval_batch_size",
    "gradient_accumulation_steps",
    "max_steps",
    "num_train_epochs",
    "learning_rate",
    "lr_scheduler_type",
    "lr_scheduler_kwargs",
    "warmup_ratio",
    "warmup_steps",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "gradient_checkpointing_kwargs",
    "logging_first_step",
    "eval_strategy",
    "eval_steps",
    "seed",
    "data_seed",
    "full_determinism",
    "dataloader_persistent_workers",
    "ddp_find_unused_parameters",
)
# TrainingParams fields to_hf passes under TRL's own name (training.reward_functions: the trainer's reward_funcs)
TO_TRL = {
    "enable_gradient_checkpointing": "gradient_checkpointing",
    "optimizer": "optim",
    "compile": "torch_compile",
    "empty_device_cache_steps": "torch_empty_cache_steps",
    "dep_log_level": "log_level",
    "include_performance_metrics": "include_num_input_tokens_seen",
}
# TrainingParams fields to_hf turns into a TRL field grpo-web sets for every run
SET_BY_GRPO_WEB = {
    "output_dir": "output_dir: grpo-web gives each run its own folder",
    "logging_steps": "logging_steps: grpo-web logs every step",
    "logging_strategy": "logging_strategy: grpo-web logs every step",
    "logging_dir": "logging_dir: grpo-web reports to no tracker",
    "dataloader_num_workers": "dataloader_num_workers: grpo-web loads batches in the training process (0)",
    "enable_wandb": "report_to: grpo-web reports to no tracker; the run page draws the metrics",
    "enable_tensorboard": "report_to: grpo-web reports to no tracker; the run page draws the metrics",
    "enable_mlflow": "report_to: grpo-web reports to no tracker; the run page draws the metrics",
}
# TrainingParams fields Oumi keeps to itself (TRL never receives them), each with what it does there
OUMI_ONLY = {
    "log_level": "the level of Oumi's own logger",
    "log_examples": "Oumi's collator logs example batches",
    "log_model_summary": "Oumi prints the model's layers",
    "include_alternative_mfu_metrics": "an Oumi callback's MFU metrics",
    "profiler": "Oumi's torch profiler",
    "telemetry": "Oumi's timing telemetry",
    "nccl_default_timeout_minutes": "Oumi's init_distributed timeout (grpo-web keeps torch's default)",
    "sgd_momentum": "read by Oumi's own trainer (trainer_type OUMI) only",
    "gkd": "read by Oumi's TRL_GKD trainer only",
    "gold": "read by Oumi's TRL_GOLD trainer only",
    "label_ignore_index": "the label Oumi's collators mask; TRL's trainers mask with -100",
}
# Oumi's defaults that to_hf (and GrpoParams, PeftParams, VerlGrpoTrainer) pass when the file leaves the key out,
# where TRL's (or grpo-web's) differ: (where Oumi keeps it, Oumi's default, the kinds it applies to)
OUMI_DEFAULTS = {
    "learning_rate": ("training.learning_rate", 5e-05, ("grpo", "sft", "verl")),
    "gradient_checkpointing": ("training.enable_gradient_checkpointing", False, ("grpo", "sft", "verl")),
    "optim": ("training.optimizer", "adamw_torch", ("grpo", "sft")),
    "data_seed": ("training.data_seed", 42, ("grpo", "sft")),
    "temperature": ("training.grpo.temperature", 0.9, ("grpo", "verl")),
}
# the training.* keys VerlGrpoTrainer._create_config reads (oumi.train: reward_functions, the verl trainer's own keys)
VERL_READS = frozenset(
    "learning_rate enable_gradient_checkpointing num_train_epochs max_steps eval_strategy eval_steps save_epoch "
    "save_steps save_final_model resume_from_checkpoint try_resume_from_last_checkpoint logging_strategy enable_wandb "
    "run_name output_dir verl_config_overrides reward_functions grpo use_peft enable_tensorboard enable_mlflow "
    "logging_steps logging_dir dataloader_num_workers log_level log_model_summary profiler telemetry "
    "include_alternative_mfu_metrics nccl_default_timeout_minutes".split()
)
# the training.grpo keys VerlGrpoTrainer._create_config reads
VERL_GRPO_READS = frozenset("max_completion_length use_vllm temperature vllm_gpu_memory_utilization".split())
PEFT_DEFAULTS = {"lora_r": 8, "lora_alpha": 8, "lora_dropout": 0.0}
SHUFFLED = (
    "Oumi shuffles the rows once before training; TRL's sampler shuffles them every epoch anyway (by the run's seed)"
)
NOT_IN_OUMI = "a key Oumi's {} does not have (Oumi refuses it too)"
