"""The token shards hold TRL's own tensors: per token the log-probability at generation and at the update, the
reference's, the entropy, the importance ratio and the clipping flags, exactly as GRPOTrainer._compute_loss had them.

The oracle is TRL itself, watched independently of the capture (tests/trl_oracle.py): ``sys.settrace`` follows every
call of TRL's ``GRPOTrainer._compute_loss`` and keeps its inputs and its locals as it returns (``coef_1``,
``is_region_clipped``, ...), and TRL's logged step metrics (entropy, clip ratios) are compared with the stored
tokens' masked means."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from grpo_web_attach.tokens import ROW_KEY, shard_name
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.demo_data import arithmetic_rows
from grpo_web_protocol.events import EventWriter, read_events

from tests.trl_oracle import Watching

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

# beta > 0: a reference model; num_iterations 2: the second step trains on the batch again after an update, so the
# ratio moves off 1 and TRL computes old_per_token_logps at generation; a high learning rate gets tokens clipped
BASE = {
    "num_generations": 4,
    "per_device_train_batch_size": 8,
    "max_steps": 2,
    "max_completion_length": 12,
    "learning_rate": 5e-2,
    "seed": 7,
    "save_steps": 0,
    "gradient_checkpointing": False,
    "beta": 0.04,
    "num_iterations": 2,
}


def _config(tmp_path, model, sample_groups: int, **grpo) -> TrainConfig:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(64)))
    return TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        tokens_dir=str(tmp_path / "tokens"),
        token_sample_groups=sample_groups,
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        grpo=GRPOFields(**{**BASE, **grpo}),
    )


def _train_watched(config):
    from workers.training.train import make_trainer

    events = EventWriter(config.event_log)
    trainer = make_trainer(config, events)
    try:
        with Watching(trainer) as calls:
            trainer.train()
    finally:
        events.close()
    return trainer, calls


def _shard(config, step):
    return pq.read_table(f"{config.tokens_dir}/{shard_name(step)}").to_pylist()


def test_the_stored_token_values_are_trls_tensors(tmp_path, tiny_model):
    config = _config(tmp_path, tiny_model, sample_groups=-1)  # every group
    trainer, calls = _train_watched(config)
    assert [c["step"] for c in calls] == [1, 2]  # one micro-batch per optimizer step
    clipped_anywhere = moved = False
    for call in calls:
        rows = {r["index"]: r for r in _shard(config, call["step"])}
        inputs = call["inputs"]
        order = inputs[ROW_KEY].tolist()
        assert sorted(rows) == list(range(8))  # all 2 groups x 4 completions
        for j, index in enumerate(order):
            row = rows[index]
            n = len(row["token_ids"])
            assert row["update_step"] == call["step"] and row["step"] == 1  # both steps train on batch 1
            assert (row["group"], row["completion"]) == (index // 4, index % 4)
            assert row["token_ids"] == inputs["completion_ids"][j, :n].tolist()
            assert n == int(inputs["completion_mask"][j].sum())
            # bit for bit: float32 as TRL had it
            assert row["logprob"] == call["per_token_logps"][j, :n].tolist()
            assert row["old_logprob"] == call["old_per_token_logps"][j, :n].tolist()
            assert row["old_logprob"] == inputs["old_per_token_logps"][j, :n].tolist()  # computed at generation
            assert row["ref_logprob"] == inputs["ref_per_token_logps"][j, :n].tolist()
            assert row["entropy"] == call["entropies"][j, :n].tolist()
            assert row["ratio"] == call["coef_1"][j, :n].tolist()
            assert row["clipped_low"] == call["is_low_clipped"][j, :n].tolist()
            assert row["clipped_high"] == call["is_high_clipped"][j, :n].tolist()
            assert row["clipped"] == call["is_region_clipped"][j, :n].tolist()
            assert row["mask"] == call["mask"][j, :n].bool().tolist()
            assert row["sampling_logprob"] is None  # no vLLM: TRL has no separate sampling log-probabilities
            # each token decoded alone, as the page shows it
            assert row["tokens"] == trainer.processing_class.batch_decode([[t] for t in row["token_ids"]])
            clipped_anywhere |= any(row["clipped"])
            moved |= call["step"] == 2 and any(abs(r - 1.0) > 1e-3 for r in row["ratio"])
    assert moved, "the second pass over the batch should see a policy that moved"
    assert clipped_anywhere, "a learning rate this high should clip some tokens at the second pass"

    # and TRL's own logged figures for each step are the stored tokens' masked means
    logged = {e["step"]: e for e in trainer.state.log_history if "loss" in e}
    for step in (1, 2):
        tokens = [(m, e, c) for r in _shard(config, step) for m, e, c in zip(r["mask"], r["entropy"], r["clipped"])]
        counted = [(e, c) for m, e, c in tokens if m]
        assert logged[step]["entropy"] == pytest.approx(sum(e for e, _ in counted) / len(counted), rel=1e-5)
        assert logged[step]["clip_ratio/region_mean"] == pytest.approx(
            sum(c for _, c in counted) / len(counted), abs=1e-6
        )


def test_the_default_sample_keeps_one_group_per_batch_joined_to_its_rollouts(tmp_path, tiny_model):
    from workers.training.train import run

    config = _config(tmp_path, tiny_model, sample_groups=TrainConfig.token_sample_groups, beta=0.0, num_iterations=1)
    assert config.token_sample_groups == 1  # the default
    run(config)
    events, _ = read_events(config.event_log)
    batches = {e["step"]: e["rows"] for e in events if e["type"] == "rollouts"}
    assert sorted(batches) == [1, 2]
    for step, rollouts in batches.items():
        rows = _shard(config, step)
        assert [r["index"] for r in rows] == [0, 1, 2, 3]  # group 0 only
        for r in rows:
            assert r["step"] == r["update_step"] == step
            assert len(r["token_ids"]) == rollouts[r["index"]]["length"]
            assert r["ref_logprob"] is None  # beta 0: no reference model
            # TRL skipped old_per_token_logps (on-policy): it used the update's log-probabilities, detached
            assert r["old_logprob"] == r["logprob"]
            assert r["ratio"] == [1.0] * len(r["token_ids"])


def test_no_sample_writes_no_shards(tmp_path, tiny_model):
    from workers.training.train import run

    config = _config(tmp_path, tiny_model, sample_groups=0, max_steps=1, beta=0.0, num_iterations=1)
    run(config)
    assert not (tmp_path / "tokens").exists()


def test_a_run_that_fails_leaves_its_last_shard_whole(tmp_path, tiny_model):
    from transformers import TrainerCallback

    from workers.training.train import make_trainer

    class FailAfterStep2(TrainerCallback):  # added after the shard callback: step 2's shard is handed over first
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 2:
                raise RuntimeError("boom at step 2")

    config = _config(tmp_path, tiny_model, sample_groups=-1, max_steps=4, beta=0.0, num_iterations=1)
    events = EventWriter(config.event_log)
    trainer = make_trainer(config, events)
    trainer.add_callback(FailAfterStep2())
    with pytest.raises(RuntimeError, match="boom at step 2"):
        trainer.train()
    events.close()
    # train() has waited for the writer thread: step 2's shard is on disk, whole, and nothing half-written is left
    assert sorted(p.name for p in (tmp_path / "tokens").iterdir()) == [shard_name(1), shard_name(2)]
    assert sorted(r["index"] for r in _shard(config, 2)) == list(range(8))


def test_a_shard_that_cannot_be_written_fails_the_run(tmp_path, tiny_model):
    from workers.training.train import make_trainer

    config = _config(tmp_path, tiny_model, sample_groups=1, max_steps=1, beta=0.0, num_iterations=1)
    (tmp_path / "tokens").write_text("a file where the shards' folder should be")
    events = EventWriter(config.event_log)
    trainer = make_trainer(config, events)
    with pytest.raises(RuntimeError, match="writing a token shard failed") as raised:
        trainer.train()  # the writer thread's error comes back to the training thread, not lost with the thread
    events.close()
    assert isinstance(raised.value.__cause__, (FileExistsError, NotADirectoryError))
