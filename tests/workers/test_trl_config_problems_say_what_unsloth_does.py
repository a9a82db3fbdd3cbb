"""TRL's own GRPOConfig checks, made before a run is queued (workers.reward_checks.trl_config_problems): a batch that
is not a multiple of num_generations is refused with TRL's message, and, since Unsloth's GRPOConfig trains such a
config by changing the batch, with what Unsloth would have trained (its rule: unsloth_zoo's compiled GRPOConfig sets
per_device_train_batch_size to num_generations when steps_per_generation and generation_batch_size are unset)."""

import dataclasses

from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig

from workers.reward_checks import trl_config_problems


def train_config(**grpo) -> dict:
    config = TrainConfig(
        model="tiny",
        dataset_path="/nonexistent/data.jsonl",
        output_dir="/nonexistent/out",
        event_log="/nonexistent/events.jsonl",
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        grpo=GRPOFields(**grpo),
    )
    return dataclasses.asdict(config)


def test_an_unsloth_notebook_s_batch_is_refused_saying_what_unsloth_trained():
    # the GRPO notebooks' own settings: per_device_train_batch_size = 1, num_generations = 6
    (problem,) = trl_config_problems(train_config(per_device_train_batch_size=1, num_generations=6))
    assert problem.startswith("GRPOConfig refuses this configuration (TRL's check): generation_batch_size (1) must")
    assert "Unsloth's GRPOConfig changes per_device_train_batch_size to num_generations (6)" in problem
    assert "set per_device_train_batch_size: 6 to train what Unsloth trains" in problem
    # done as it says, TRL takes it
    assert trl_config_problems(train_config(per_device_train_batch_size=6, num_generations=6)) == []


def test_another_refusal_says_nothing_of_unsloth():
    (problem,) = trl_config_problems(train_config(num_generations=1))
    assert "Unsloth" not in problem
