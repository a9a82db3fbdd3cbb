"""Files written by TRL's and verl's own code, for the importers' tests: built once a session.

``trl_output``: TRL's GRPOTrainer (the plain one, as a user's own script runs it) trains the tiny model 3 steps with
``log_completions=True`` and ``logging_steps=2``; its output_dir holds completions/completions_00002.parquet and
completions_00003.parquet (the end-of-training log writes one too) and checkpoint-3 (trainer_state.json, tokenizer).

``verl_dumps``: verl's RayPPOTrainer dump (``_log_rollout_data``, verl's own, without grpo-web's capture) of a batch
scored by hand-picked token rewards, at steps 1 and 2, with verl's GRPO advantages of it for comparison.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from workers.training.demo_data import arithmetic_rows

TRL_G = 4
VERL_G = 3
VERL_PROMPTS = ["What is 2+3?", "What is 4+4?"]
VERL_COMPLETIONS = ["5", "five", "5", "8", "?", "7"]
VERL_SCORES = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0]


@pytest.fixture(scope="session")
def trl_output(tiny_model, tmp_path_factory):
    from workers.training.protocol.config import GRPOFields, RewardSpec, TrainConfig
    from workers.training.train import make_trainer

    tmp = tmp_path_factory.mktemp("trl-run")
    data = tmp / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(32)))
    config = TrainConfig(
        model=str(tiny_model),
        dataset_path=str(data),
        output_dir=str(tmp / "out"),
        event_log=str(tmp / "events.jsonl"),
        rewards=[
            RewardSpec("digit_ratio", 1.0, builtin="digit_ratio"),
            RewardSpec("think_format", 0.5, builtin="think_format"),
        ],
        grpo=GRPOFields(
            num_generations=TRL_G,
            per_device_train_batch_size=8,
            max_steps=3,
            max_completion_length=12,
            seed=5,
            log_completions=True,
            save_steps=3,
            gradient_checkpointing=False,
        ),
    )
    trainer = make_trainer(config, None, logging_steps=2)
    try:
        trainer.train()
    finally:
        for closer in trainer.reward_closers:
            closer.close()
    return config


def verl_batch(tokenizer, *, with_uid: bool):
    """A scored generation batch as verl's trainer holds it when it dumps: left-padded prompts, right-padded
    responses, token-level scores (the score on the last token)."""
    import torch
    from verl import DataProto

    prompts, responses = [], []
    pad = tokenizer.pad_token_id
    for i, text in enumerate(VERL_COMPLETIONS):
        p = tokenizer(VERL_PROMPTS[i // VERL_G], add_special_tokens=False)["input_ids"][:10]
        r = tokenizer(text, add_special_tokens=False)["input_ids"][:5] + [tokenizer.eos_token_id]
        prompts.append([pad] * (10 - len(p)) + p)
        responses.append(r + [pad] * (6 - len(r)))
    scores = torch.zeros(len(VERL_COMPLETIONS), 6)
    for i, s in enumerate(VERL_SCORES):
        scores[i, 0] = s
    non_tensors = {
        "reward_model": np.array(
            [{"ground_truth": ["5", "8"][i // VERL_G]} for i in range(len(VERL_COMPLETIONS))], dtype=object
        ),
    }
    data = DataProto.from_dict(
        tensors={"prompts": torch.tensor(prompts), "responses": torch.tensor(responses), "token_level_scores": scores},
        non_tensors=non_tensors,
    )
    extras = {"acc": [float(s == 1.0) for s in VERL_SCORES], "pred": [c.strip() for c in VERL_COMPLETIONS]}
    if with_uid:
        extras["uid"] = [f"u{i // VERL_G}" for i in range(len(VERL_COMPLETIONS))]
    return data, extras


@pytest.fixture(scope="session")
def verl_dumps(tiny_model, tmp_path_factory):
    """verl's own dump function writes steps 1 and 2 into rollout_data_dir (step 2's lines carry a uid)."""
    from transformers import AutoTokenizer
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    folder = tmp_path_factory.mktemp("verl") / "rollout_data"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    trainer = object.__new__(RayPPOTrainer)  # verl's trainer with only what its dump reads
    trainer.tokenizer = tokenizer
    trainer._init_dump_executor()
    dump = RayPPOTrainer._log_rollout_data
    dump = getattr(dump, "original", dump)  # verl's own, should grpo-web's capture be installed in this process
    for step, with_uid in ((1, False), (2, True)):
        trainer.global_steps = step
        data, extras = verl_batch(tokenizer, with_uid=with_uid)
        dump(trainer, data, extras, {}, str(folder))
    trainer._shutdown_dump_executor()
    return folder
