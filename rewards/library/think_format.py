import re

FORMAT = re.compile(r"^\s*<think>.*?</think>.*?\\boxed\{.+?\}", re.DOTALL)


def think_format(completions, **kwargs):
    """1.0 when the completion reasons inside <think>...</think> and then gives a \\boxed{} answer, else 0.0."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        rewards.append(1.0 if FORMAT.match(text) else 0.0)
    return rewards
