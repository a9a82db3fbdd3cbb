TARGET_CHARS = 400  # completions up to this length are free
MAX_PENALTY = 1.0


def length_penalty(completions, **kwargs):
    """0 up to TARGET_CHARS characters, then falling linearly to -MAX_PENALTY at twice that length (and below)."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        excess = max(0, len(text) - TARGET_CHARS) / TARGET_CHARS
        rewards.append(-min(MAX_PENALTY, excess * MAX_PENALTY))
    return rewards
