import math
import re

# Oumi's soft_20tokens_completions reward (oumi-ai/oumi, src/oumi/datasets/grpo/rewards/completion_length_rewards.py),
# under its registry name: its TL;DR recipe names it
TARGET_TOKENS = 20


def soft_20tokens_completions(completions, **kwargs):
    """Highest (1.0) for a completion of TARGET_TOKENS whitespace-separated tokens, smoothly less either side:
    x * exp(1 - x) with x = tokens / TARGET_TOKENS (Oumi's toy length reward)."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[0]["content"]
        x = len(re.split(r"\s+", text)) / TARGET_TOKENS
        rewards.append(x * math.exp(-x) * math.e)
    return rewards
