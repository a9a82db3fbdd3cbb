import re

# open-r1's format reward (its registry name "format"): the whole completion is a think block, then an answer block
PATTERN = re.compile(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", re.DOTALL | re.MULTILINE)


def format(completions, **kwargs):
    """1.0 when the completion is exactly <think>\\n...\\n</think>\\n<answer>\\n...\\n</answer>, else 0.0 (open-r1's
    format_reward, the R1 recipe's format reward)."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        rewards.append(1.0 if PATTERN.match(text) else 0.0)
    return rewards
