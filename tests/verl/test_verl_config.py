"""The run's config as verl's Hydra overrides, composed onto verl's own ppo_trainer.yaml and checked by verl's own
validation (validate_config, and the actor's config dataclass): every key exists and the batch sizes fit."""

from pathlib import Path

import pytest
import verl
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.verl_keys import from_verl, node_layout, overrides
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config

CONFIG_DIR = str(Path(verl.__file__).parent / "trainer" / "config")


def compose_verl(config: TrainConfig, gpus: int = 1, nnodes: int = 1):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(
            "ppo_trainer",
            overrides=overrides(
                config,
                train_file="/data/train.parquet",
                val_file="/data/eval.parquet",
                reward_path="/app/bridge.py",
                config_path="/runs/7/config.json",
                gpus=gpus,
                nnodes=nnodes,
                max_prompt_length=256,
            ),
        )


def train_config(**grpo) -> TrainConfig:
    return TrainConfig(
        model="/models/tiny",
        dataset_path="/d.jsonl",
        output_dir="/runs/7/out",
        event_log="/e.jsonl",
        rewards=[RewardSpec(name="accuracy", builtin="accuracy")],
        grpo=GRPOFields(**grpo),
    )


def validate(cfg):
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    return omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)


def test_the_translated_run_composes_onto_verls_config_and_passes_its_validation():
    config = train_config(
        num_generations=4,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        beta=0.04,
        temperature=0.7,
        top_p=0.9,
        max_completion_length=64,
        learning_rate=3e-6,
        weight_decay=0.1,
        max_steps=5,
        seed=3,
        epsilon_high=0.28,
    )
    cfg = compose_verl(config)
    actor = validate(cfg)
    assert cfg.algorithm.adv_estimator == "grpo"
    assert cfg.actor_rollout_ref.rollout.n == 4
    # 8 completions x 2 accumulation steps per optimizer step = 16 completions = 4 prompts of 4
    assert cfg.data.train_batch_size == 4 and actor.ppo_mini_batch_size == 4  # prompts; verl's worker multiplies by n
    assert cfg.data.max_response_length == 64 and cfg.actor_rollout_ref.rollout.response_length == 64
    assert cfg.data.max_prompt_length == 256 and cfg.actor_rollout_ref.rollout.prompt_length == 256
    assert actor.use_kl_loss and actor.kl_loss_coef == 0.04 and actor.kl_loss_type == "low_var_kl"
    assert actor.optim.lr == 3e-6 and actor.optim.weight_decay == 0.1
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert cfg.actor_rollout_ref.rollout.temperature == 0.7 and cfg.actor_rollout_ref.rollout.top_p == 0.9
    assert cfg.trainer.total_training_steps == 5 and cfg.data.seed == 3
    assert cfg.trainer.rollout_data_dir == "/runs/7/out/verl_rollouts"
    assert list(cfg.trainer.logger) == ["console", "file"]
    assert cfg.reward.custom_reward_function.path == "/app/bridge.py"
    assert cfg.reward.custom_reward_function.reward_kwargs.config_path == "/runs/7/config.json"


def test_without_flash_attn_the_actor_uses_sdpa_on_padded_batches():
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose(
            "ppo_trainer",
            overrides=overrides(
                train_config(num_generations=2, per_device_train_batch_size=4),
                train_file="t",
                val_file="v",
                reward_path="r.py",
                config_path="c.json",
                flash_attn=False,
            ),
        )
    validate(cfg)
    assert cfg.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert not cfg.actor_rollout_ref.model.use_remove_padding


def test_a_run_without_kl_leaves_the_reference_model_out():
    cfg = compose_verl(train_config(beta=0.0, num_generations=2, per_device_train_batch_size=4))
    validate(cfg)
    assert not cfg.actor_rollout_ref.actor.use_kl_loss and not need_reference_policy(cfg)


@pytest.mark.parametrize(
    "loss_type, agg", [("grpo", "seq-mean-token-mean"), ("dr_grpo", "seq-mean-token-sum-norm"), ("dapo", "token-mean")]
)
def test_trls_loss_types_become_verls_aggregation(loss_type, agg):
    cfg = compose_verl(train_config(loss_type=loss_type, num_generations=2, per_device_train_batch_size=4))
    assert validate(cfg).loss_agg_mode == agg


def test_two_gpus_double_the_prompts_of_a_step_and_still_validate():
    cfg = compose_verl(train_config(num_generations=4, per_device_train_batch_size=8), gpus=2)
    validate(cfg)
    assert cfg.data.train_batch_size == 4 and cfg.trainer.n_gpus_per_node == 2


def test_two_nodes_of_two_gpus_take_the_prompts_of_four_and_still_validate():
    cfg = compose_verl(train_config(num_generations=4, per_device_train_batch_size=8), gpus=2, nnodes=2)
    validate(cfg)
    assert cfg.data.train_batch_size == 8
    assert (cfg.trainer.n_gpus_per_node, cfg.trainer.nnodes) == (2, 2)


@pytest.mark.parametrize(
    "gpus, nodes, layout",
    [
        (4, [8], (4, 1)),  # one node holds them all
        (4, [2, 2], (2, 2)),
        (4, [2, 1, 2], (2, 2)),  # the 1-GPU node is left out
        (3, [2, 1, 1], (1, 3)),  # 3 is odd: one per node
        (2, [0, 2], (2, 1)),  # a CPU-only head
    ],
)
def test_a_verl_run_on_ray_asks_every_node_of_its_pool_for_the_same_gpus(gpus, nodes, layout):
    assert node_layout(gpus, nodes) == layout


@pytest.mark.parametrize("gpus, nodes", [(2, [0]), (4, [2, 1]), (3, [2, 2]), (1, [])])
def test_a_cluster_without_room_for_a_verl_run_is_named(gpus, nodes):
    with pytest.raises(ValueError, match=f"cannot place {gpus} GPU"):
        node_layout(gpus, nodes)


def test_verls_gsm8k_grpo_example_reads_back_into_the_run_form():
    # the overrides of verl's examples/grpo_trainer/run_qwen2-7b.sh, composed onto verl's config
    example = [
        "algorithm.adv_estimator=grpo",
        "data.train_batch_size=1024",
        "data.max_response_length=1024",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.actor.ppo_mini_batch_size=256",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.rollout.n=5",
        "trainer.total_epochs=15",
        "actor_rollout_ref.rollout.name=vllm",
    ]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose("ppo_trainer", overrides=example)
    fields, extra, notes, errors = from_verl(OmegaConf.to_container(cfg, resolve=False))
    assert not errors
    assert fields["num_generations"] == 5 and fields["beta"] == 0.001 and fields["learning_rate"] == 1e-6
    assert fields["max_completion_length"] == 1024
    # 256 prompts x 5 completions an update over verl's default 8 GPUs: 160 a GPU (no micro-batch set: one pass)
    assert fields["per_device_train_batch_size"] == 160 and fields["gradient_accumulation_steps"] == 1
    assert fields["steps_per_generation"] == 4
    assert fields["max_steps"] == -1 and fields["num_train_epochs"] == 15  # the import counts the epochs' steps
    # and back: the run's own translation gives verl the same batch shape on the same GPUs
    config = train_config(
        **{k: v for k, v in fields.items() if k in GRPOFields.__dataclass_fields__ and k != "max_steps"}
    )
    back = compose_verl(config, gpus=8)
    assert back.data.train_batch_size == 1024 and back.actor_rollout_ref.actor.ppo_mini_batch_size == 256
    assert back.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 160


def test_a_non_grpo_verl_config_is_refused():
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose("ppo_trainer")
    assert any("adv_estimator" in e for e in from_verl(OmegaConf.to_container(cfg, resolve=False))[3])
