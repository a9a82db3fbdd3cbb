"""verl's own code end to end on a fabricated batch: verl loads the reward bridge (get_custom_reward_fn, with our
reward_kwargs) and scores through its NaiveRewardManager, the user's function running in its sandbox; verl's
compute_grpo_outcome_advantage gives the advantages; verl's RayPPOTrainer._log_rollout_data (with the capture's extra
keys) writes its rollout dump; the dump is ingested, and the stored rows equal what verl computed."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import verl
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.events import read_events
from grpo_web_protocol.verl_dump import metrics_event, reward_means
from grpo_web_protocol.verl_keys import overrides
from hydra import compose, initialize_config_dir
from transformers import AutoTokenizer
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_response_mask
from verl.trainer.ppo.reward import get_custom_reward_fn
from verl.workers.reward_manager.naive import NaiveRewardManager

from runs.models import Rollout, Run, StepMetric
from runs.rollouts.ingest import ingest_events
from runs.rollouts.selectors import step_groups
from workers.training import verl_reward
from workers.training.verl_data import rollouts_event, verl_rows
from workers.training.verl_run import install_capture

pytestmark = pytest.mark.django_db

EXACT = """
def exact(completions, answer, prompts=None, **kwargs):
    return [1.0 if c.strip() == a else (None if c.strip() == "?" else 0.0) for c, a in zip(completions, answer)]
"""
G = 3
ROWS = [{"prompt": "What is 2+3?", "answer": "5"}, {"prompt": "What is 4+4?", "answer": "8"}]
COMPLETIONS = ["5", "five", "5", "8", "?", "7"]  # 3 per prompt; "?" makes the user's function abstain


@pytest.fixture
def setup(tmp_path, tiny_model):
    config = TrainConfig(
        model=str(tiny_model),
        dataset_path=str(tmp_path / "train.jsonl"),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        rewards=[
            RewardSpec("exact", 1.0, source=EXACT, entrypoint="exact"),
            RewardSpec("digit_ratio", 0.5, builtin="digit_ratio"),
        ],
        grpo=GRPOFields(num_generations=G, per_device_train_batch_size=6),
        sandbox_slot_base=40,
    )
    config_path = tmp_path / "config.json"
    config_path.write_text(config.to_json())
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        cfg = compose(
            "ppo_trainer",
            overrides=overrides(
                config,
                train_file="t.parquet",
                val_file="v.parquet",
                config_path=str(config_path),
                reward_path=verl_reward.__file__,
            ),
        )
    yield config, cfg, AutoTokenizer.from_pretrained(tiny_model)
    for scorer in verl_reward._scorers.values():
        scorer.close()
    verl_reward._scorers.clear()


def batch(tokenizer, prompt_len=24, response_len=6) -> DataProto:
    """A generation batch as verl's rollout hands it over: left-padded prompts, right-padded responses."""
    rows = verl_rows(ROWS, "arith", "train")
    prompts, responses, attention = [], [], []
    pad = tokenizer.pad_token_id
    for i, text in enumerate(COMPLETIONS):
        p = tokenizer.apply_chat_template(rows[i // G]["prompt"], add_generation_prompt=True, tokenize=True)
        p = p if isinstance(p, list) else list(p["input_ids"])
        r = tokenizer(text, add_special_tokens=False)["input_ids"][: response_len - 1] + [tokenizer.eos_token_id]
        prompts.append([pad] * (prompt_len - len(p)) + p)
        responses.append(r + [pad] * (response_len - len(r)))
        attention.append([0] * (prompt_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (response_len - len(r)))
    prompts, responses = torch.tensor(prompts), torch.tensor(responses)
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": torch.tensor(attention),
        },
        non_tensors={
            "data_source": np.array([rows[i // G]["data_source"] for i in range(len(COMPLETIONS))], dtype=object),
            "reward_model": np.array([rows[i // G]["reward_model"] for i in range(len(COMPLETIONS))], dtype=object),
            "extra_info": np.array([dict(rows[i // G]["extra_info"]) for i in range(len(COMPLETIONS))], dtype=object),
            "uid": np.array([f"uid-{i // G}" for i in range(len(COMPLETIONS))], dtype=object),
        },
    )
    data.batch["response_mask"] = compute_response_mask(data)
    return data


def test_verl_scores_through_the_bridge_and_the_sandbox(setup):
    config, cfg, tokenizer = setup
    data = batch(tokenizer)
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=get_custom_reward_fn(cfg))
    out = manager(data, return_dict=True)
    scores = out["reward_tensor"].sum(-1).tolist()
    exact = out["reward_extra_info"]["rewards/exact"]
    assert exact[:4] == [1.0, 0.0, 1.0, 1.0] and np.isnan(exact[4]) and exact[5] == 0.0
    digits = out["reward_extra_info"]["rewards/digit_ratio"]
    # the weighted total, over the functions that scored
    assert scores == pytest.approx([e * 1.0 + d * 0.5 if e == e else d * 0.5 for e, d in zip(exact, digits)])


def test_a_sandboxed_reward_that_raises_is_a_reported_fault_not_a_crash(setup, tmp_path):
    config, cfg, tokenizer = setup
    config.rewards = [
        RewardSpec("boom", 1.0, source="def boom(completions, **kw):\n    raise ValueError('no')\n", entrypoint="boom")
    ]
    path = tmp_path / "boom.json"
    path.write_text(config.to_json())
    result = verl_reward.compute_score(
        "arith", "5", "5", verl_rows(ROWS, "arith", "train")[0]["extra_info"], config_path=str(path)
    )
    assert result["score"] == 0.0 and np.isnan(result["rewards/boom"])
    faults = [e for e in read_events(config.event_log)[0] if e["type"] == "reward_fault"]
    assert faults and "no" in faults[0]["error"]


def test_verls_dump_and_advantages_are_stored_as_verl_computed_them(setup, tmp_path, owner, dataset_version):
    config, cfg, tokenizer = setup
    data = batch(tokenizer)
    manager = NaiveRewardManager(tokenizer, num_examine=0, compute_score=get_custom_reward_fn(cfg))
    out = manager(data, return_dict=True)
    data.batch["token_level_scores"] = out["reward_tensor"]
    data.batch["token_level_rewards"] = out["reward_tensor"]
    advantages, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=data.batch["response_mask"],
        index=data.non_tensor_batch["uid"],
    )
    data.batch["advantages"] = advantages

    trainer = object.__new__(RayPPOTrainer)  # verl's trainer with only what its dump reads
    trainer.tokenizer, trainer.global_steps = tokenizer, 4
    trainer._init_dump_executor()
    install_capture()
    trainer._log_rollout_data(data, out["reward_extra_info"], {}, str(tmp_path / "dump"))
    trainer._shutdown_dump_executor()

    event = rollouts_event(tmp_path / "dump" / "4.jsonl", ["exact", "digit_ratio"], G)
    run = Run.objects.create(
        owner=owner,
        name="v",
        model="tiny",
        dataset_version=dataset_version,
        trainer="verl",
        rewards=[{"name": "exact", "weight": 1.0}, {"name": "digit_ratio", "weight": 0.5}],
        config={"max_steps": 5, "num_generations": G},
        total_steps=5,
    )
    metrics = metrics_event(
        {"step": 4, "data": {"critic/score/mean": 0.5, "actor/pg_loss": -0.1, "response_length/mean": 2.0}}, 5
    )
    ingest_events(
        run,
        [
            {**event, "ts": 1.0},
            {**metrics, "ts": 1.0},
            {"type": "metrics", "step": 4, "ts": 1.0, "metrics": reward_means(event)},
        ],
    )

    stored = list(Rollout.objects.filter(run=run, step=4).order_by("index"))
    verl_scores = out["reward_tensor"].sum(-1).tolist()
    mask = data.batch["response_mask"]
    assert [r.completion for r in stored] == tokenizer.batch_decode(data.batch["responses"], skip_special_tokens=True)
    assert [r.reward for r in stored] == pytest.approx(verl_scores)
    # verl's GRPO advantage: one value per completion, the same on every token of it
    assert [r.advantage for r in stored] == pytest.approx(advantages[:, 0].tolist())
    assert [r.length for r in stored] == mask.sum(-1).tolist()
    assert [r.group for r in stored] == [0, 0, 0, 1, 1, 1]
    assert stored[4].rewards[0] is None and stored[0].rewards == pytest.approx(
        [1.0, out["reward_extra_info"]["rewards/digit_ratio"][0]]
    )
    assert stored[0].columns == {"answer": "5"} and not any(r.truncated for r in stored)
    assert "What is 2+3?" in stored[0].prompt
    # the groups page recomputes each advantage from the stored rewards by TRL's formula: verl's GRPO agrees
    groups = step_groups(run, 4)
    assert len(groups) == 2
    for c in [c for g in groups for c in g["completions"]]:
        assert c["formula_advantage"] == pytest.approx(c["advantage"], rel=1e-3)  # std + 1e-4 (TRL), + 1e-6 (verl)
    m = StepMetric.objects.get(run=run, step=4).metrics
    assert m["reward"] == 0.5 and m["loss"] == -0.1 and m["critic/score/mean"] == 0.5
    assert m["rewards/exact/mean"] == pytest.approx(np.nanmean(out["reward_extra_info"]["rewards/exact"]))
    json.dumps(m)  # JSON-safe (no NaN)


def test_verls_reward_loop_scores_each_completion_through_the_bridge(setup):
    """The reward path verl's trainer takes (its RewardLoopWorker: one compute_score call per completion, run
    concurrently on an executor), with the run's functions in their sandboxes behind it."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    config, cfg, tokenizer = setup
    data = batch(tokenizer)
    worker = RewardLoopWorker(cfg)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))  # the loop verl's worker runs on
    scores = [o["reward_score"] for o in outputs]
    exact = [o["reward_extra_info"]["rewards/exact"] for o in outputs]
    digits = [o["reward_extra_info"]["rewards/digit_ratio"] for o in outputs]
    assert exact[:4] == [1.0, 0.0, 1.0, 1.0] and np.isnan(exact[4]) and exact[5] == 0.0
    assert digits == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert scores == pytest.approx([e * 1.0 + d * 0.5 if e == e else d * 0.5 for e, d in zip(exact, digits)])
