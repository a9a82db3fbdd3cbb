import re

# Oumi's count_letters reward (oumi-ai/oumi, src/oumi/datasets/grpo/rewards/count_letters_rewards.py), under its
# registry name: its letter-counting recipe names it
BOXED = re.compile(r"\\boxed\{([-+]?\d+)\}")


def count_letters(completions, letter_count, **kwargs):
    """Oumi's letter-counting reward: the answer is the one \\boxed{} integer (none, or more than one: -3.0);
    1 / (|answer - letter_count| + 0.5) - 2 otherwise, so 0.0 for the right count, falling towards -2 the further
    it is off. `letter_count` is the dataset's column (oumi-ai/oumi-letter-count)."""
    rewards = []
    for completion, target in zip(completions, letter_count):
        text = completion if isinstance(completion, str) else completion[0]["content"]
        found = BOXED.findall(text)
        if len(found) != 1:
            rewards.append(-3.0)
            continue
        rewards.append(1 / (abs(int(found[0]) - target) + 0.5) - 2)
    return rewards
