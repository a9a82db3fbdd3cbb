import re

NUMBER = re.compile(r"-?\d+")
BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")


def letter_count(completions, word, letter, **kwargs):
    """For "how many r's are in strawberry": 1.0 when the answer (the last \\boxed{} number, or else the last number
    in the text) equals the count of `letter` in `word`, else 0.0."""
    rewards = []
    for completion, w, ch in zip(completions, word, letter):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        answers = BOXED.findall(text) or NUMBER.findall(text)
        expected = str(w).lower().count(str(ch).lower())
        rewards.append(1.0 if answers and int(answers[-1]) == expected else 0.0)
    return rewards
