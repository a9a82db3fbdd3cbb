import unicodedata

# R1 added a language-consistency reward: the share of the reasoning written in the target script.
SCRIPTS = {"latin": "LATIN", "cyrillic": "CYRILLIC", "cjk": "CJK", "arabic": "ARABIC", "greek": "GREEK"}


def language_consistency(completions, language="latin", **kwargs):
    """Share of the completion's letters written in the target script (`language` column, or latin when absent)."""
    rewards = []
    languages = language if isinstance(language, list) else [language] * len(completions)
    for completion, lang in zip(completions, languages):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        script = SCRIPTS.get(str(lang or "latin").lower(), "LATIN")
        letters = [ch for ch in text if ch.isalpha()]
        if not letters:
            rewards.append(0.0)
            continue
        same = sum(1 for ch in letters if unicodedata.name(ch, "").startswith(script))
        rewards.append(same / len(letters))
    return rewards
