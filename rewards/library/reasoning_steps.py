import re

# "Step 1:", a numbered line, a bullet, or a transition word (open-r1's reasoning_steps_reward)
STEP = re.compile(r"(Step \d+:|^\d+\.|\n-|\n\*|First,|Second,|Next,|Finally,)")
WANTED = 3  # steps for the full reward


def reasoning_steps(completions, **kwargs):
    """Rewards visible step-by-step reasoning: min(1, steps / 3) (open-r1's reasoning_steps_reward)."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        rewards.append(min(1.0, len(STEP.findall(text)) / WANTED))
    return rewards
