"""Demo datasets generated locally and deterministically (no downloads)."""

from __future__ import annotations

import random


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
