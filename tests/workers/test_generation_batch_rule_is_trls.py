"""grpo-web's pre-queue check of the generation batch is TRL's own rule (GRPOConfig.__post_init__): for each
combination of batch fields, grpo-web refuses exactly when TRL's GRPOConfig refuses over the generation batch. The
first is TRL's "LoRA Without Regret" GRPO command (docs/source/lora_without_regret.md, huggingface/trl), which TRL
builds: 16 generations of one prompt, one completion per device step, 8 accumulation steps, generation_batch_size 16."""

import pytest
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from trl import GRPOConfig

CASES = [
    # per_device_train_batch_size, gradient_accumulation_steps, num_generations, steps_per_generation, extra
    (1, 8, 16, None, {"generation_batch_size": 16}),  # LoRA Without Regret
    (1, 4, 8, None, {"generation_batch_size": 8}),  # the same page's Python example
    (1, 8, 16, None, {}),  # no generation_batch_size: 8 completions cannot hold a group of 16
    (2, 1, 4, None, {"generation_batch_size": 6}),  # 6 is a multiple of the batch, not of the group
    (2, 1, 4, None, {"generation_batch_size": 8}),
    (4, 2, 8, None, {}),
    (4, 1, 8, 2, {}),
    (4, 1, 8, 3, {}),
]


def _trl_refuses_the_generation_batch(pdtbs, ga, g, spg, extra) -> bool:
    try:
        GRPOConfig(
            output_dir="/tmp/unused",
            per_device_train_batch_size=pdtbs,
            gradient_accumulation_steps=ga,
            num_generations=g,
            steps_per_generation=spg,
            use_cpu=True,
            report_to="none",
            **extra,
        )
    except ValueError as exc:
        assert "generation_batch_size" in str(exc) or "num_generations" in str(exc), exc
        return True
    return False


@pytest.mark.parametrize(("pdtbs", "ga", "g", "spg", "extra"), CASES)
def test_grpo_web_refuses_the_generation_batch_exactly_when_trl_does(pdtbs, ga, g, spg, extra):
    config = TrainConfig(
        model="tiny",
        dataset_path="d.jsonl",
        output_dir="out",
        event_log="events.jsonl",
        rewards=[RewardSpec(name="r", source="def r(completions, **kw):\n    return [0.0] * len(completions)\n")],
        grpo=GRPOFields(
            per_device_train_batch_size=pdtbs,
            gradient_accumulation_steps=ga,
            num_generations=g,
            steps_per_generation=spg,
            max_steps=2,
        ),
        extra=dict(extra),
    )
    ours = [e for e in config.validate() if "generation batch" in e or "generation_batch_size" in e]
    assert bool(ours) == _trl_refuses_the_generation_batch(pdtbs, ga, g, spg, extra), ours
