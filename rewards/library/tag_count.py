TAGS = ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")


def tag_count(completions, **kwargs):
    """0.25 for each of the four format tags that appears exactly once: partial credit on the way to the format
    reward (open-r1's tag_count_reward)."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        rewards.append(sum(0.25 for tag in TAGS if text.count(tag) == 1))
    return rewards
