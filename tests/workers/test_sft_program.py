"""The training program's SFT kind on its own: TRL's SFTTrainer, no Django, no broker, no database."""

import json
from pathlib import Path

import pytest
from grpo_web_protocol.config import SFTFields, TrainConfig
from grpo_web_protocol.events import read_events

from workers.training.coldstart import cold_start_rows
from workers.training.sft import sft_rows
from workers.training.train import run

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _config(tmp_path, model, rows=None, **sft):
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in (rows or cold_start_rows(64))))
    return TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        rewards=[],
        kind="sft",
        sft=SFTFields(**sft),
    )


def _metrics(path):
    events, _ = read_events(path)
    return [e for e in events if e["type"] == "metrics" and "loss" in e["metrics"]]


def test_an_sft_run_lowers_its_loss_and_logs_sft_curves(tmp_path, tiny_model):
    config = _config(tmp_path, tiny_model, max_steps=12, save_steps=0)
    run(config)
    metrics = _metrics(config.event_log)
    assert [m["step"] for m in metrics] == list(range(1, 13))
    first, last = metrics[0]["metrics"], metrics[-1]["metrics"]
    assert {"loss", "mean_token_accuracy", "learning_rate"} <= set(first)
    assert last["loss"] < first["loss"]
    assert last["mean_token_accuracy"] > first["mean_token_accuracy"]
    events, _ = read_events(config.event_log)
    assert events[0]["type"] == "started" and events[0]["kind"] == "sft" and events[0]["total_steps"] == 12
    assert events[-1] == {**events[-1], "type": "finished", "step": 12}
    final = Path(config.output_dir) / "final"
    assert (final / "model.safetensors").exists() and (final / "tokenizer_config.json").exists()


def test_an_sft_run_saves_checkpoints_and_resumes_from_one(tmp_path, tiny_model):
    config = _config(tmp_path, tiny_model, max_steps=4, save_steps=2)
    run(config)
    events, _ = read_events(config.event_log)
    assert [e["step"] for e in events if e["type"] == "checkpoint"] == [2, 4]
    # the same run, longer, continues from its step-4 checkpoint: only steps 5 and 6 are trained again
    longer = _config(tmp_path, tiny_model, max_steps=6, save_steps=2)
    longer.resume_from_checkpoint = str(Path(config.output_dir) / "checkpoint-4")
    Path(config.event_log).unlink()
    run(longer)
    assert [m["step"] for m in _metrics(longer.event_log)] == [5, 6]


def test_rows_become_prompt_completion_or_conversations():
    rows = sft_rows(
        [
            {"prompt": "What is 2+2?", "completion": "4", "answer": "4"},
            {"prompt": [{"role": "user", "content": "Hi"}], "completion": "Hello"},
            {
                "prompt": "ignored",
                "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}],
            },
        ]
    )
    assert rows == [
        {"prompt": "What is 2+2?", "completion": "4"},
        {"prompt": [{"role": "user", "content": "Hi"}], "completion": [{"role": "assistant", "content": "Hello"}]},
        {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]},
    ]


def test_a_conversational_dataset_trains(tmp_path, tiny_model):
    rows = [
        {
            "prompt": "x",
            "messages": [{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["completion"]}],
        }
        for r in cold_start_rows(32)
    ]
    config = _config(tmp_path, tiny_model, rows=rows, max_steps=2, save_steps=0, completion_only_loss=False)
    run(config)
    assert [m["step"] for m in _metrics(config.event_log)] == [1, 2]
