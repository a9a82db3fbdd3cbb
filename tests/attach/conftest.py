"""Files written by TRL's and verl's own code, for the importers' tests: built once a session.

``trl_output``: TRL's GRPOTrainer (the plain one, as a user's own script runs it) trains the tiny model 3 steps with
``log_completions=True`` and ``logging_steps=2``; its output_dir holds completions/completions_00002.parquet and
completions_00003.parquet (the end-of-training log writes one too) and checkpoint-3 (trainer_state.json, tokenizer).

``verl_dumps``: verl's RayPPOTrainer dump (``_log_rollout_data``, verl's own, without grpo-web's capture) of a batch
scored by hand-picked token rewards, at steps 1 and 2, with verl's GRPO advantages of it for comparison.

``verl_validation``: verl's own validation (``RayPPOTrainer._validate``) at steps 0, 2 and 4, writing its dump into
``validation_data_dir``: verl's dataset and dataloader over the parquet grpo-web writes for verl, verl's repeat of
each prompt ``val_kwargs.n`` times, verl's reward manager (NaiveRewardManager with verl's math_dapo scorer: score
±1, acc, pred), verl's dump and verl's validation metrics (returned beside the folder, to compare with). Only the
generation (vLLM's server, behind verl's agent loop) is stood in for: it answers from VAL_ANSWERS.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from django.test import Client
from grpo_web_protocol.demo_data import arithmetic_rows

from runs.accounts.services import token_create

TRL_G = 4
VERL_G = 3
VERL_PROMPTS = ["What is 2+3?", "What is 4+4?"]
VERL_COMPLETIONS = ["5", "five", "5", "8", "?", "7"]
VERL_SCORES = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0]
VAL_ROWS = [{"prompt": "What is 2+3?", "answer": "5"}, {"prompt": "What is 4+4?", "answer": "8"}]
VAL_N = 3  # verl's actor_rollout_ref.rollout.val_kwargs.n
# what "the model" answers at each validated step, VAL_N a prompt in verl's interleaved order
VAL_ANSWERS = {
    0: ["Answer: 6", "no idea", "Answer: 5", "Answer: 9", "Answer: 9", "Answer: 7"],
    2: ["Answer: 5", "Answer: 6", "Answer: 5", "Answer: 8", "Answer: 9", "Answer: 9"],
    4: ["Answer: 5", "Answer: 5", "Answer: 5", "Answer: 8", "Answer: 8", "Answer: 3"],
}


def token_client(user, scope="attach") -> Client:
    """A client that sends a bearer token of this scope, as an attach client does."""
    _, raw = token_create(owner=user, name=scope, scope=scope)
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def attached(owner):
    """An attached run of one reward function ("accuracy"), its group size not in its config: its batches say it."""
    api = token_client(owner)
    made = api.post(
        "/api/attach/runs",
        {"name": "script", "reward_names": ["accuracy"], "config": {"max_steps": 3}},
        content_type="application/json",
    )
    assert made.status_code == 200, made.content
    return api, made.json()


@pytest.fixture
def root(settings, tmp_path):
    """An empty import folder, the server's only one (GRPO_IMPORT_ROOTS); a test module may keep its own."""
    root = tmp_path / "imports"
    root.mkdir()
    settings.GRPO_IMPORT_ROOTS = [root]
    return root


@pytest.fixture(scope="session")
def trl_output(tiny_model, tmp_path_factory):
    from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig

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


class AnswersRollout:
    """Stands in for verl's async rollout manager (vLLM behind its agent loop) in RayPPOTrainer._validate: for each
    prompt of the generation batch, the chat-templated prompt ids (as the agent loop makes them) and the answer of
    VAL_ANSWERS for the trainer's step, scored by verl's own reward manager; returned as the agent loop returns them
    (_postprocess: the tensors, rm_scores on the last response token, the reward's extra info and its keys)."""

    def __init__(self, trainer, tokenizer):
        from omegaconf import OmegaConf
        from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

        self.trainer, self.tokenizer, self.seen = trainer, tokenizer, 0
        self.reward = NaiveRewardManager(OmegaConf.create({}), tokenizer, None)  # verl's default_compute_score

    def generate_sequences(self, batch):
        import asyncio

        import torch
        from verl import DataProto

        answers = VAL_ANSWERS[self.trainer.global_steps]
        tok, pad = self.tokenizer, self.tokenizer.pad_token_id
        prompts, responses = [], []
        for raw in batch.non_tensor_batch["raw_prompt"]:
            ids = tok.apply_chat_template(list(raw), add_generation_prompt=True, tokenize=True)
            prompts.append(ids if isinstance(ids, list) else ids["input_ids"])
            answer = answers[self.seen % len(answers)]
            responses.append(tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
            self.seen += 1
        width_p, width_r = max(map(len, prompts)), max(map(len, responses))
        prompt_ids = torch.tensor([[pad] * (width_p - len(p)) + p for p in prompts])
        response_ids = torch.tensor([r + [pad] * (width_r - len(r)) for r in responses])
        prompt_mask = torch.tensor([[0] * (width_p - len(p)) + [1] * len(p) for p in prompts])
        response_mask = torch.tensor([[1] * len(r) + [0] * (width_r - len(r)) for r in responses])
        attention = torch.cat([prompt_mask, response_mask], 1)
        out = DataProto.from_dict(
            tensors={
                "prompts": prompt_ids,
                "responses": response_ids,
                "response_mask": response_mask,
                "input_ids": torch.cat([prompt_ids, response_ids], 1),
                "attention_mask": attention,
                "position_ids": (attention.cumsum(1) - 1).clamp(min=0),
            }
        )
        results = []
        for i in range(len(out)):
            item = out[i : i + 1]
            item.non_tensor_batch = {k: v[i : i + 1] for k, v in batch.non_tensor_batch.items()}
            results.append(asyncio.get_event_loop().run_until_complete(self.reward.run_single(item)))
        scores = torch.zeros_like(response_mask, dtype=torch.float32)
        scores[torch.arange(len(out)), response_mask.sum(1) - 1] = torch.tensor([r["reward_score"] for r in results])
        out.batch["rm_scores"] = scores
        keys = list(results[0]["reward_extra_info"])
        for key in keys:
            out.non_tensor_batch[key] = np.array([r["reward_extra_info"][key] for r in results])
        out.meta_info = {"reward_extra_keys": keys}
        return out


@pytest.fixture(scope="session")
def verl_validation(tiny_model, tmp_path_factory):
    """verl's _validate at steps 0 (val_before_train), 2 and 4 (test_freq=2) dumps into validation_data_dir; returns
    the folder and verl's validation metrics by step."""
    from omegaconf import OmegaConf
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from workers.training.verl_data import write_parquet

    tmp = tmp_path_factory.mktemp("verl-val")
    (tmp / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in VAL_ROWS))
    parquet = write_parquet(tmp / "val.jsonl", tmp / "val.parquet", data_source="math_dapo", split="eval")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    dataset = RLHFDataset(
        data_files=[parquet],
        tokenizer=tokenizer,
        config=OmegaConf.create({"max_prompt_length": 64, "filter_overlong_prompts": False, "cache_dir": str(tmp)}),
        processor=None,
    )
    folder = tmp / "validation_data"
    trainer = object.__new__(RayPPOTrainer)  # verl's trainer with only what its validation reads
    trainer.tokenizer = tokenizer
    trainer.config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"val_kwargs": {"n": VAL_N, "do_sample": True}, "agent": {"num_workers": 1}}
            },
            "trainer": {"log_val_generations": 0, "validation_data_dir": str(folder)},
        }
    )
    trainer.val_dataloader = DataLoader(dataset, batch_size=len(VAL_ROWS), shuffle=False, collate_fn=collate_fn)
    trainer.use_rm = False
    trainer.async_rollout_manager = AnswersRollout(trainer, tokenizer)
    trainer._init_dump_executor()
    metrics = {}
    for step in VAL_ANSWERS:
        trainer.global_steps = step
        metrics[step] = {k: float(v) for k, v in trainer._validate().items()}
    trainer._shutdown_dump_executor()
    return folder, metrics
