def digit_ratio(completions, **kwargs):
    """Share of the completion's non-space characters that are digits. Dense and easy: the demo's tiny random model
    learns it within 30 steps (and then happily answers everything with digits: a small lesson in reward hacking)."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        chars = [ch for ch in text if not ch.isspace()]
        rewards.append(sum(ch.isdigit() for ch in chars) / len(chars) if chars else 0.0)
    return rewards
