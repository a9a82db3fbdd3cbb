"""The training program on its own: no Django, no broker, no database."""

import json
from pathlib import Path

import pytest
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.demo_data import arithmetic_rows
from grpo_web_protocol.events import read_events

from workers.training.train import run

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _config(tmp_path, model, **grpo):
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(64)))
    return TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        rewards=[
            RewardSpec("digit_ratio", 1.0, builtin="digit_ratio"),
            RewardSpec("think_format", 0.5, builtin="think_format"),
        ],
        grpo=GRPOFields(**grpo),
    )


def _rewards_by_step(path):
    events, _ = read_events(path)
    return [e["metrics"]["reward"] for e in events if e["type"] == "metrics" and "reward" in e["metrics"]]


def test_the_demo_run_learns_its_demo_reward(tmp_path, tiny_model):
    config = _config(tmp_path, tiny_model)  # the defaults are the demo's: 30 steps, G=8, seed 42
    run(config)
    rewards = _rewards_by_step(config.event_log)
    assert len(rewards) == 30
    assert rewards[0] < 0.1
    assert sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5
    assert max(rewards[-5:]) >= 0.6


def test_the_same_seed_gives_the_same_run(tmp_path, tiny_model):
    first = _config(tmp_path / "a", tiny_model, max_steps=3)
    second = _config(tmp_path / "b", tiny_model, max_steps=3)
    run(first)
    run(second)
    events_a, _ = read_events(first.event_log)
    events_b, _ = read_events(second.event_log)
    rollouts_a = [e["rows"] for e in events_a if e["type"] == "rollouts"]
    rollouts_b = [e["rows"] for e in events_b if e["type"] == "rollouts"]
    assert len(rollouts_a) == 3
    assert rollouts_a == rollouts_b


def test_each_groups_advantages_have_mean_zero(tmp_path, tiny_model):
    config = _config(tmp_path, tiny_model, max_steps=2, num_generations=4, per_device_train_batch_size=8)
    run(config)
    events, _ = read_events(config.event_log)
    batches = [e for e in events if e["type"] == "rollouts"]
    assert [b["step"] for b in batches] == [1, 2]
    for batch in batches:
        assert len(batch["rows"]) == 8
        for g in range(2):
            group = [r["advantage"] for r in batch["rows"] if r["group"] == g]
            assert len(group) == 4
            assert abs(sum(group) / 4) < 1e-5


def test_a_missing_model_ends_with_a_failed_event(tmp_path):
    config = _config(tmp_path, tmp_path / "no-such-model", max_steps=1)
    with pytest.raises(OSError):
        run(config)
    events, _ = read_events(config.event_log)
    assert events[-1]["type"] == "failed"
    assert "no-such-model" in events[-1]["error"]


def test_code_tests_scores_in_training_and_each_rollout_keeps_its_test_outcomes(tmp_path, tiny_model):
    from grpo_web_protocol.demo_data import python_task_rows

    config = _config(tmp_path, tiny_model, max_steps=1, num_generations=4, per_device_train_batch_size=8)
    Path(config.dataset_path).write_text("".join(json.dumps(r) + "\n" for r in python_task_rows(16)))
    config.rewards = [RewardSpec("code_tests", 1.0, builtin="code_tests")]
    run(config)
    events, _ = read_events(config.event_log)
    rows = [r for e in events if e["type"] == "rollouts" for r in e["rows"]]
    assert len(rows) == 8
    for row in rows:  # the tiny model writes no code: every test fails for want of a fenced block
        outcomes = row["columns"]["code_tests"]
        assert row["rewards"] == [0.0] and len(outcomes) == 4
        assert all(o["passed"] is False and o["error"] == "no fenced code block" for o in outcomes)
        assert json.loads(row["columns"]["tests"])  # the row's own columns stay beside them


def _tiny_moe(folder: Path, tiny_model) -> Path:
    """A random-initialised Qwen2-MoE with the tiny model's tokenizer: a model whose experts a batch can leave
    without gradients."""
    from transformers import AutoTokenizer, Qwen2MoeConfig, Qwen2MoeForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    config = Qwen2MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=32,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_experts=4,
        num_experts_per_tok=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    Qwen2MoeForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_ddp_searches_for_unused_weights_only_where_a_model_can_leave_some(tmp_path, tiny_model):
    """What DDP is given in a run of several processes (Ray workers, accelerate's): transformers turns the unused-weight
    search on whenever gradient checkpointing is off; a dense model's ranks skip it, the run's own setting wins, and
    a mixture of experts keeps it."""
    from workers.training.train import make_trainer

    def search(config):
        return make_trainer(config, None).accelerator.ddp_handler.find_unused_parameters

    dense = _config(tmp_path / "dense", tiny_model, max_steps=1, gradient_checkpointing=False)
    assert search(dense) is False
    asked = _config(tmp_path / "asked", tiny_model, max_steps=1, gradient_checkpointing=False)
    asked.extra = {"ddp_find_unused_parameters": True}
    assert search(asked) is True
    moe = _config(tmp_path / "moe", _tiny_moe(tmp_path / "moe-model", tiny_model), gradient_checkpointing=False)
    moe.grpo.max_steps = 1
    assert search(moe) is True
