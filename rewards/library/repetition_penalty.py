NGRAM_SIZE = 3  # open-r1's repetition_n_grams
MAX_PENALTY = -1.0  # open-r1's repetition_max_penalty: the reward of a completion that only repeats itself


def repetition_penalty(completions, **kwargs):
    """MAX_PENALTY times the share of repeated word n-grams (0 for a completion without repeats): the n-gram
    repetition penalty of Yeo et al. 2025, Appendix C.2, as open-r1's repetition_penalty_reward computes it."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        words = text.lower().split()
        if len(words) < NGRAM_SIZE:
            rewards.append(0.0)
            continue
        ngrams = list(zip(*[words[i:] for i in range(NGRAM_SIZE)]))
        rewards.append((1 - len(set(ngrams)) / len(ngrams)) * MAX_PENALTY)
    return rewards
