"""The verl launcher's CPU parts, against verl's own code: the dataset version in verl's parquet layout read by
verl's RLHFDataset; the run's config composed and validated as verl's main does; verl's file logger and rollout dump
writer followed into the event log, which ingests like a TRL run's."""

import json

import numpy as np
import pytest
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.demo_data import arithmetic_rows
from grpo_web_protocol.events import EventWriter, read_events
from grpo_web_protocol.verl_dump import ADVANTAGE_KEY, GROUP_KEY, LENGTH_KEY, TRUNCATED_KEY
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.utils.tracking import FileLogger

from workers.training.verl_run import Follower, verl_config


@pytest.fixture
def config(tmp_path, tiny_model):
    rows = [{"prompt": r["prompt"], "answer": str(r["answer"])} for r in arithmetic_rows(12, seed=1)]
    rows[0]["prompt"] = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "1+1?"}]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return TrainConfig(
        model=str(tiny_model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        trainer="verl",
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        grpo=GRPOFields(num_generations=4, per_device_train_batch_size=8, max_steps=3),
    )


def test_the_dataset_is_verls_layout_as_verls_own_loader_reads_it(config, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # one GPU, as the supervisor would give it
    (tmp_path / "out").mkdir()
    cfg = verl_config(config, str(tmp_path / "config.json"))
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    tokenizer = AutoTokenizer.from_pretrained(config.model)
    dataset = RLHFDataset(data_files=cfg.data.train_files, tokenizer=tokenizer, config=cfg.data)
    assert len(dataset) == 12  # no prompt is longer than the measured max_prompt_length
    first, second = dataset[0], dataset[1]
    assert first["raw_prompt"][0] == {"role": "system", "content": "Answer briefly."}
    assert second["raw_prompt"] == [{"role": "user", "content": arithmetic_rows(12, seed=1)[1]["prompt"]}]
    assert second["reward_model"] == {"style": "rule", "ground_truth": str(arithmetic_rows(12, seed=1)[1]["answer"])}
    assert json.loads(second["extra_info"]["columns"]) == {"answer": str(arithmetic_rows(12, seed=1)[1]["answer"])}
    assert second["data_source"] == config.eval_source


def test_verls_logger_and_dumps_become_events(config, tmp_path, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(out / "verl_metrics.jsonl"))
    out.mkdir()
    logger = FileLogger("grpo-web", "run")  # verl's own file logger, as its Tracking("file") writes
    logger.log({"critic/score/mean": np.float32(0.25), "actor/pg_loss": 0.5, "response_length/mean": 7.0}, step=1)
    RayPPOTrainer._write_generations(  # verl's own dump writer, with the capture's extra keys
        ["p1"] * 4 + ["p2"] * 4,
        [f"c{i}" for i in range(8)],
        ["2"] * 8,
        [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        {
            "rewards/digit_ratio": [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0],
            GROUP_KEY: ["a"] * 4 + ["b"] * 4,
            ADVANTAGE_KEY: [0.8, -0.8, 0.8, -0.8, -0.5, -0.5, -0.5, 1.5],
            LENGTH_KEY: [3] * 8,
            TRUNCATED_KEY: [False] * 7 + [True],
        },
        str(out / "verl_rollouts"),
        1,
    )
    Follower(config, EventWriter(config.event_log)).poll()
    events = read_events(config.event_log)[0]
    rollouts = [e for e in events if e["type"] == "rollouts"]
    assert len(rollouts) == 1 and rollouts[0]["step"] == 1
    rows = rollouts[0]["rows"]
    assert [r["group"] for r in rows] == [0] * 4 + [1] * 4 and rows[7]["truncated"] and rows[7]["advantage"] == 1.5
    metrics = {k: v for e in events if e["type"] == "metrics" for k, v in e["metrics"].items()}
    assert metrics["reward"] == 0.25 and metrics["loss"] == 0.5 and metrics["completions/mean_length"] == 7.0
    assert metrics["rewards/digit_ratio/mean"] == 0.375
    logger.finish()
