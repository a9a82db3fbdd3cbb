"""A run as the training program's config (grpo_web_protocol TrainConfig): one builder for the check made
before the run is queued (runs.lifecycle.services.run_create, on an unsaved run) and for the worker that starts it
(workers.supervisor), so what TRL's own checks see before a GPU is spent is what the trainer gets."""

from __future__ import annotations

from django.conf import settings
from grpo_web_protocol.config import SFT_COLUMNS, GRPOFields, RewardSpec, SFTFields, ToolSpec, TrainConfig

from rewards.selectors import environment_spec, reward_specs, tool_specs
from runs.datasets.services import version_training_file
from runs.evaluations.services import eval_settings, eval_source
from runs.models import Run
from runs.paths import checkpoint_path, event_log_path, resolve_model


def run_train_config(
    run: Run, *, slot_base: int, vllm_server_port: int | None = None, write_files: bool = True
) -> TrainConfig:
    """``run``'s TrainConfig. ``slot_base``: the first sandbox slot of its reward functions and tools, the worker's to
    give (workers.placement: slot_base(), or a Ray attempt's ray_slot_base). ``write_files`` False (the check before
    the run is queued, when it has no folder yet): the dataset is named where it is stored and no split is written.
    TypeError when ``run.config`` holds a field its kind does not have."""
    evaluation = eval_settings(run)
    if run.is_sft:
        # an SFT run's evaluations sample with GRPO's generation defaults, seeded like the run
        fields = dict(sft=SFTFields(**run.config), grpo=GRPOFields(seed=run.config.get("seed", 42)))
    else:
        fields = dict(grpo=GRPOFields(**run.config))
    version = run.dataset_version
    dataset_path, eval_path = version.path, None
    if write_files:
        dataset_path = version_training_file(
            version=version, out=run.run_dir / "train.jsonl", extra_columns=SFT_COLUMNS if run.is_sft else ()
        )
        if evaluation.eval_steps > 0 and version.eval_rows > 0:
            eval_path = version_training_file(version=version, out=run.run_dir / "eval.jsonl", split="eval")
    checkpoint = checkpoint_path(run)
    return TrainConfig(
        model=resolve_model(run.model),
        dataset_path=dataset_path,
        output_dir=str(run.run_dir / "output"),
        event_log=str(event_log_path(run)),
        rewards=[RewardSpec(**r) for r in reward_specs(run.rewards)],
        tools=[ToolSpec(**t) for t in tool_specs(run.tools)],
        environment=ToolSpec(**environment_spec(run.environment)) if run.environment else None,
        kind=run.kind,
        trainer=run.trainer,
        **fields,
        extra=run.config_extra,
        max_reward_faults=settings.GRPO_REWARD_MAX_FAULTS,
        allow_weak_sandbox=settings.GRPO_SANDBOX_ALLOW_WEAK,
        sandbox_slot_base=slot_base,
        resume_from_checkpoint=str(checkpoint) if checkpoint else None,
        vllm_server_port=vllm_server_port,
        evaluation=evaluation,
        eval_dataset_path=eval_path,
        eval_source=eval_source(version),
        tokens_dir=None if run.is_sft else str(run.run_dir / "tokens"),
        token_sample_groups=run.token_sample_groups,
    )
