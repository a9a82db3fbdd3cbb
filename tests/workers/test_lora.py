"""LoRA runs (TRL's peft_config under TRL's ModelConfig names): the tiny model trains on CPU with adapters, the
capture is the same, checkpoints hold the adapter and resume from it, and the final model is saved merged (loadable by
anything that loads a model) with the adapter alone beside it."""

import json

import pytest
import torch
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.demo_data import arithmetic_rows
from grpo_web_protocol.events import read_events
from transformers import AutoModelForCausalLM

from workers.training.train import run

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


def _config(tmp_path, model, **grpo):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(32)))
    base = dict(
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=12,
        learning_rate=0.05,
        use_peft=True,
        lora_r=4,
        lora_alpha=8,
        lora_target_modules="q_proj,v_proj",
        save_steps=1,
        gradient_checkpointing=False,
    )
    return TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        grpo=GRPOFields(**{**base, **grpo}),
    )


def test_a_lora_run_trains_checkpoints_adapters_and_saves_the_merged_model(tmp_path, tiny_model):
    config = _config(tmp_path, tiny_model, max_steps=2)
    run(config)
    events, _ = read_events(config.event_log)
    assert [e["step"] for e in events if e["type"] == "rollouts"] == [1, 2]
    assert next(e for e in events if e["type"] == "finished")["step"] == 2
    out = tmp_path / "out"
    adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and sorted(adapter["target_modules"]) == ["q_proj", "v_proj"]
    assert (out / "checkpoint-1" / "adapter_config.json").is_file()
    assert not (out / "checkpoint-1" / "model.safetensors").exists()  # the checkpoint is the adapter alone

    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    merged = AutoModelForCausalLM.from_pretrained(out / "final")  # a plain model: the adapter merged in
    changed = {name for name, p in merged.named_parameters() if not torch.equal(p, dict(base.named_parameters())[name])}
    assert changed and all(("q_proj" in n or "v_proj" in n) for n in changed)
    # a checkpoint loads as a model too (transformers puts the adapter on its base): evaluations can pick it
    assert AutoModelForCausalLM.from_pretrained(out / "checkpoint-1") is not None


def test_a_lora_run_resumes_from_its_adapter_checkpoint(tmp_path, tiny_model):
    first = _config(tmp_path, tiny_model, max_steps=1)
    run(first)
    resumed = _config(tmp_path, tiny_model, max_steps=2)
    resumed.resume_from_checkpoint = str(tmp_path / "out" / "checkpoint-1")
    resumed.event_log = str(tmp_path / "resumed.jsonl")
    run(resumed)
    events, _ = read_events(resumed.event_log)
    assert [e["step"] for e in events if e["type"] == "rollouts"] == [2]
    assert next(e for e in events if e["type"] == "finished")["step"] == 2
