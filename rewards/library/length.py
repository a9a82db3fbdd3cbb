from math_verify import parse, verify


def length(completions, solution=None, answer=None, **kwargs):
    """Kimi 1.5's length reward (open-r1's len_reward), within the batch TRL passes: with lambda = 0.5 - (len -
    shortest) / (longest - shortest), a correct completion earns lambda and a wrong one min(0, lambda); 0 for all
    when every completion has the same length. Correct: it matches the row's `solution` (or `answer`) as math-verify
    judges it; a row whose gold answer cannot be parsed counts as correct, as in open-r1."""
    golds = solution if solution is not None else answer if answer is not None else [None] * len(completions)
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    correct = []
    for text, gold_text in zip(texts, golds):
        gold = parse(str(gold_text)) if gold_text is not None else []
        correct.append(True if not gold else bool(verify(parse(text), gold)))
    shortest, longest = min(map(len, texts), default=0), max(map(len, texts), default=0)
    if longest == shortest:
        return [0.0] * len(texts)
    rewards = []
    for text, ok in zip(texts, correct):
        value = 0.5 - (len(text) - shortest) / (longest - shortest)
        rewards.append(float(value if ok else min(0.0, value)))
    return rewards
