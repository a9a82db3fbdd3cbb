"""Demo datasets generated locally and deterministically (no downloads)."""

from __future__ import annotations

import random
import string

WORDS = [
    "strawberry", "banana", "raspberry", "mississippi", "committee", "bookkeeper", "balloon", "parallel", "coffee",
    "letter", "apple", "grammar", "success", "address", "occurrence", "pepper", "referee", "tomorrow", "necessary",
    "possession", "assessment", "accommodate", "embarrass", "millennium", "questionnaire", "cappuccino", "broccoli",
    "zucchini", "spaghetti", "giraffe", "hippopotamus", "kangaroo", "penguin", "cinnamon", "vanilla", "caramel",
    "chocolate", "marshmallow", "butterfly", "dragonfly", "grasshopper", "mosquito", "avocado", "pineapple",
    "watermelon", "blueberry", "cranberry", "gooseberry", "elderberry", "mulberry", "tangerine", "mandarin",
    "apricot", "persimmon", "pomegranate", "coconut", "lemon", "orange", "cherry", "peach", "plum", "grape",
    "reasoning", "gradient", "optimizer", "reward", "advantage", "policy", "sampling", "temperature", "tokenizer",
    "transformer", "attention", "embedding", "parameter", "baseline", "variance", "probability", "statistics",
    "algorithm", "recursion", "iteration", "compiler", "interpreter", "keyboard", "mountain", "valley", "river",
    "ocean", "island", "volcano", "glacier", "desert", "forest", "thunder", "lightning", "rainbow", "horizon",
    "telescope", "microscope", "umbrella", "bicycle", "calendar", "dictionary", "encyclopedia", "library",
]


def letter_count_rows(n: int = 200, *, seed: int = 0) -> list[dict]:
    """Count a letter in a word: ``{"prompt": "How many r's are in strawberry?", "answer": "3", "word":
    "strawberry", "letter": "r"}`` (the ``letter_count`` reward reads ``word`` and ``letter``).

    Mostly letters the word has (some twice or more), sometimes one it lacks, so "0" is a possible answer."""
    rng = random.Random(seed)
    pairs = [("strawberry", "r")]
    while len(pairs) < n:
        word = rng.choice(WORDS)
        pairs.append((word, rng.choice(word) if rng.random() < 0.8 else rng.choice(string.ascii_lowercase)))
    return [{"prompt": f"How many {letter}'s are in {word}?", "answer": str(word.count(letter)), "word": word,
             "letter": letter} for word, letter in pairs[:n]]


def arithmetic_rows(n: int = 200, *, seed: int = 0) -> list[dict]:
    """Small additions and subtractions with their answers: ``{"prompt": "What is 3 + 4?", "answer": "7"}``."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, 20), rng.randint(0, 20)
        if rng.random() < 0.5:
            rows.append({"prompt": f"What is {a} + {b}?", "answer": str(a + b)})
        else:
            a, b = max(a, b), min(a, b)
            rows.append({"prompt": f"What is {a} - {b}?", "answer": str(a - b)})
    return rows


NAMES = ["Natalia", "Weng", "Betty", "Julie", "James", "Albert", "Ken", "Alexis", "Tina", "Mark", "Randy", "Joy"]
ITEMS = ["clips", "apples", "books", "marbles", "stickers", "pencils", "cookies", "cards", "shells", "stamps"]


def word_problem_rows(n: int = 100, *, seed: int = 0) -> list[dict]:
    """GSM8K-style word problems whose ``answer`` column holds the worked solution ending in ``#### <number>``."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        name, item = rng.choice(NAMES), rng.choice(ITEMS)
        a, b, c = rng.randint(2, 40), rng.randint(2, 9), rng.randint(1, 30)
        kind = rng.randrange(3)
        if kind == 0:
            q = (f"{name} has {a} {item}. {name} buys {b} boxes with {c} {item} in each box. "
                 f"How many {item} does {name} have now?")
            steps, ans = f"{b} boxes hold {b} * {c} = {b * c} {item}.\n{a} + {b * c} = {a + b * c}", a + b * c
        elif kind == 1:
            total = a * b
            q = f"{name} shares {total} {item} equally among {b} friends. How many {item} does each friend get?"
            steps, ans = f"Each friend gets {total} / {b} = {a} {item}.", a
        else:
            q = (f"{name} had {a + c} {item} and gave away {c} of them, then found {b} more. "
                 f"How many {item} does {name} have?")
            steps, ans = f"After giving away: {a + c} - {c} = {a}.\nAfter finding more: {a} + {b} = {a + b}", a + b
        rows.append({"question": q, "answer": f"{steps}\n#### {ans}"})
    return rows
