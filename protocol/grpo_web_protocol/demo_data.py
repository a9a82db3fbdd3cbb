"""Demo datasets generated locally and deterministically (no downloads)."""

from __future__ import annotations

import json
import math
import random
import string

WORDS = [
    "strawberry",
    "banana",
    "raspberry",
    "mississippi",
    "committee",
    "bookkeeper",
    "balloon",
    "parallel",
    "coffee",
    "letter",
    "apple",
    "grammar",
    "success",
    "address",
    "occurrence",
    "pepper",
    "referee",
    "tomorrow",
    "necessary",
    "possession",
    "assessment",
    "accommodate",
    "embarrass",
    "millennium",
    "questionnaire",
    "cappuccino",
    "broccoli",
    "zucchini",
    "spaghetti",
    "giraffe",
    "hippopotamus",
    "kangaroo",
    "penguin",
    "cinnamon",
    "vanilla",
    "caramel",
    "chocolate",
    "marshmallow",
    "butterfly",
    "dragonfly",
    "grasshopper",
    "mosquito",
    "avocado",
    "pineapple",
    "watermelon",
    "blueberry",
    "cranberry",
    "gooseberry",
    "elderberry",
    "mulberry",
    "tangerine",
    "mandarin",
    "apricot",
    "persimmon",
    "pomegranate",
    "coconut",
    "lemon",
    "orange",
    "cherry",
    "peach",
    "plum",
    "grape",
    "reasoning",
    "gradient",
    "optimizer",
    "reward",
    "advantage",
    "policy",
    "sampling",
    "temperature",
    "tokenizer",
    "transformer",
    "attention",
    "embedding",
    "parameter",
    "baseline",
    "variance",
    "probability",
    "statistics",
    "algorithm",
    "recursion",
    "iteration",
    "compiler",
    "interpreter",
    "keyboard",
    "mountain",
    "valley",
    "river",
    "ocean",
    "island",
    "volcano",
    "glacier",
    "desert",
    "forest",
    "thunder",
    "lightning",
    "rainbow",
    "horizon",
    "telescope",
    "microscope",
    "umbrella",
    "bicycle",
    "calendar",
    "dictionary",
    "encyclopedia",
    "library",
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
    return [
        {
            "prompt": f"How many {letter}'s are in {word}?",
            "answer": str(word.count(letter)),
            "word": word,
            "letter": letter,
        }
        for word, letter in pairs[:n]
    ]


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


def worked_answer_rows(n: int = 200, *, seed: int = 7) -> list[dict]:
    """The arithmetic prompts answered with a short worked trace in the ``<think>...</think> \\boxed{}`` format, in
    TRL's prompt-completion format (and the ``answer``): the R1 recipe's cold start and its worked answers."""
    rows = []
    for row in arithmetic_rows(n, seed=seed):
        expression = row["prompt"].removeprefix("What is ").rstrip("?")
        rows.append(
            {
                "prompt": row["prompt"],
                "completion": f"<think>{expression} = {row['answer']}</think> \\boxed{{{row['answer']}}}",
                "answer": row["answer"],
            }
        )
    return rows


def arithmetic_tool_rows(n: int = 200, *, seed: int = 0) -> list[dict]:
    """The arithmetic set as chat prompts that offer the ``calculator`` tool (TRL calls tools only in conversations):
    ``{"prompt": [{"role": "user", "content": "What is 3 + 4? Use the calculator."}], "answer": "7"}``."""
    return [
        {"prompt": [{"role": "user", "content": f"{row['prompt']} Use the calculator."}], "answer": row["answer"]}
        for row in arithmetic_rows(n, seed=seed)
    ]


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
            q = (
                f"{name} has {a} {item}. {name} buys {b} boxes with {c} {item} in each box. "
                f"How many {item} does {name} have now?"
            )
            steps, ans = f"{b} boxes hold {b} * {c} = {b * c} {item}.\n{a} + {b * c} = {a + b * c}", a + b * c
        elif kind == 1:
            total = a * b
            q = f"{name} shares {total} {item} equally among {b} friends. How many {item} does each friend get?"
            steps, ans = f"Each friend gets {total} / {b} = {a} {item}.", a
        else:
            q = (
                f"{name} had {a + c} {item} and gave away {c} of them, then found {b} more. "
                f"How many {item} does {name} have?"
            )
            steps, ans = f"After giving away: {a + c} - {c} = {a}.\nAfter finding more: {a} + {b} = {a + b}", a + b
        rows.append({"question": q, "answer": f"{steps}\n#### {ans}"})
    return rows


def _add(rng):
    a, b = rng.randint(-99, 99), rng.randint(-99, 99)
    return f"assert add({a}, {b}) == {a + b}"


def _count_vowels(rng):
    word = rng.choice(WORDS)
    word = word.capitalize() if rng.random() < 0.5 else word
    return f"assert count_vowels({word!r}) == {sum(ch in 'aeiouAEIOU' for ch in word)}"


def _reverse_words(rng):
    words = rng.sample(WORDS, rng.randint(1, 4))
    return f"assert reverse_words({' '.join(words)!r}) == {' '.join(reversed(words))!r}"


def _is_prime(rng):
    n = rng.randint(0, 200)
    return f"assert is_prime({n}) == {n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))}"


def _factorial(rng):
    n = rng.randint(0, 12)
    return f"assert factorial({n}) == {math.factorial(n)}"


def _is_palindrome(rng):
    word = rng.choice(["level", "racecar", "noon", "abba", "x", *WORDS[:20]])
    return f"assert is_palindrome({word!r}) == {word == word[::-1]}"


def _sum_of_two(rng):
    a, b = rng.randint(-999, 999), rng.randint(-999, 999)
    return {"input": f"{a} {b}\n", "output": f"{a + b}\n"}


def _largest(rng):
    xs = [rng.randint(-50, 50) for _ in range(rng.randint(1, 8))]
    return {"input": f"{len(xs)}\n{' '.join(map(str, xs))}\n", "output": f"{max(xs)}\n"}


# (name, prompt, reference solution, test maker: rng -> one assert, or one input/output pair)
PYTHON_TASKS = [
    (
        "add",
        "Write a Python function `add(a, b)` that returns the sum of two integers.",
        "def add(a, b):\n    return a + b\n",
        _add,
    ),
    (
        "count_vowels",
        "Write a Python function `count_vowels(s)` that returns how many vowels (a, e, i, o, u; any "
        "case) the string `s` holds.",
        "def count_vowels(s):\n    return sum(ch in 'aeiouAEIOU' for ch in s)\n",
        _count_vowels,
    ),
    (
        "reverse_words",
        "Write a Python function `reverse_words(s)` that returns the words of `s` in reverse order, "
        "joined by single spaces.",
        "def reverse_words(s):\n    return ' '.join(reversed(s.split()))\n",
        _reverse_words,
    ),
    (
        "is_prime",
        "Write a Python function `is_prime(n)` that returns True when the integer `n` is a prime number.",
        "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n"
        "        if n % i == 0:\n            return False\n        i += 1\n    return True\n",
        _is_prime,
    ),
    (
        "factorial",
        "Write a Python function `factorial(n)` that returns n! for an integer n >= 0.",
        "def factorial(n):\n    result = 1\n    for k in range(2, n + 1):\n        result *= k\n    return result\n",
        _factorial,
    ),
    (
        "is_palindrome",
        "Write a Python function `is_palindrome(s)` that returns True when the string `s` reads the same backwards.",
        "def is_palindrome(s):\n    return s == s[::-1]\n",
        _is_palindrome,
    ),
    (
        "sum_of_two",
        "Write a Python program that reads two integers from one line of standard input and prints their sum.",
        "a, b = map(int, input().split())\nprint(a + b)\n",
        _sum_of_two,
    ),
    (
        "largest",
        "Write a Python program that reads a count n and then n integers (one line, space separated) from "
        "standard input and prints the largest.",
        "input()\nprint(max(map(int, input().split())))\n",
        _largest,
    ),
]


def python_task_rows(n: int = 120, *, seed: int = 0, tests_per_row: int = 4) -> list[dict]:
    """Small Python tasks with tests, for the ``code_tests`` reward: ``{"prompt": ..., "tests": "<JSON list>",
    "task": "add", "solution": "<reference code>"}``. ``tests`` is JSON text of assert statements or of
    ``{"input", "output"}`` pairs (one kind per row), so the column has one type in every row."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        name, prompt, solution, make = PYTHON_TASKS[i % len(PYTHON_TASKS)]
        tests = [make(rng) for _ in range(tests_per_row)]
        rows.append(
            {
                "prompt": f"{prompt} Answer with the code in one ```python block.",
                "tests": json.dumps(tests),
                "task": name,
                "solution": solution,
            }
        )
    return rows
