"""Synthetic GRPO rollouts for the benchmarks: R1-style transcripts (a <think> section, arithmetic, a boxed answer),
per-function rewards, TRL's group advantages, and self-reflection phrases that grow more common as steps pass.

Two lengths, side by side in the benches that store, search or show completions:

- ``short``: a few hundred bytes a completion, the benches' first rows (fast to make, the per-row costs);
- ``realistic``: R1-like lengths (``realistic_length``: a lognormal around 3,000 tokens, about 12 KB, a tail to the
  ``cap_tokens`` cut, 16,000 by default: open-r1's recipes set ``max_completion_length`` from 4,096 to 32,768), the
  think block padded with word runs of the same Zipf vocabulary, the boxed answer still at the end.

Deterministic for a seed. ``rollout_events`` yields event-log events exactly as workers.training.capture writes them.
"""

from __future__ import annotations

import math
import random

REWARD_NAMES = ["accuracy", "think_format", "digit_ratio"]
REWARD_WEIGHTS = [1.0, 0.5, 0.5]
REFLECTIONS = [
    "Wait,",
    "Let me check:",
    "Actually,",
    "Hmm,",
    "Let me verify.",
    "Let me reconsider.",
    "On second thought,",
    "I made an error.",
]
# a Zipf-like vocabulary: common filler words and rarer ones, so phrase searches range from common to rare
_SYLLABLES = ["ka", "lo", "mi", "ren", "sto", "va", "tu", "pel", "dor", "qui", "zan", "bri", "fo", "gle", "nu", "xis"]
FILLER = [
    "so",
    "the",
    "sum",
    "is",
    "then",
    "we",
    "add",
    "carry",
    "digits",
    "first",
    "next",
    "total",
    "number",
    "result",
    "step",
    "ones",
    "tens",
    "gives",
    "now",
    "and",
]


LENGTHS = ("short", "realistic")
BYTES_PER_TOKEN = 4  # English text through a BPE tokenizer: about four bytes a token


def realistic_length(rng: random.Random, *, median_tokens: int = 3000, cap_tokens: int = 16000) -> int:
    """Tokens of one R1-style completion: lognormal around ``median_tokens`` (sigma 0.7: about 10% past 2.5x the
    median), cut at ``cap_tokens`` (max_completion_length)."""
    return max(16, min(cap_tokens, int(rng.lognormvariate(math.log(median_tokens), 0.7))))


def vocabulary(rng: random.Random, n: int = 3000) -> list[str]:
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Generator:
    def __init__(
        self,
        seed: int = 0,
        num_generations: int = 8,
        prompts: int = 4096,
        lengths: str = "short",
        median_tokens: int = 3000,
        cap_tokens: int = 16000,
    ):
        if lengths not in LENGTHS:
            raise ValueError(f"lengths must be one of {', '.join(LENGTHS)}, not {lengths!r}")
        self.lengths, self.median_tokens, self.cap_tokens = lengths, median_tokens, cap_tokens
        self.rng = random.Random(seed)
        self.G = num_generations
        self.vocab = vocabulary(self.rng)
        self.weights = [1 / (i + 1) for i in range(len(self.vocab))]  # Zipf
        self.cum = []
        total = 0.0
        for w in self.weights:
            total += w
            self.cum.append(total)
        self.problems = [(self.rng.randint(10, 999), self.rng.randint(10, 999)) for _ in range(prompts)]
        self._chunks: list[str] = []  # word runs for the realistic padding, made on first use

    def words(self, k: int) -> str:
        """``k`` words: filler, and the Zipf vocabulary's."""
        return self._words(k)

    def _words(self, k: int) -> str:
        rng = self.rng
        out = []
        for _ in range(k):
            if rng.random() < 0.6:
                out.append(rng.choice(FILLER))
            else:
                out.append(rng.choices(self.vocab, cum_weights=self.cum)[0])
        return " ".join(out)

    def prompt(self, p: int) -> str:
        a, b = self.problems[p]
        return f"What is {a} + {b}? Think step by step inside <think></think>, then give the answer."

    def completion(self, p: int, step: int, total_steps: int) -> tuple[str, bool, bool]:
        """(text, correct, reflective)"""
        rng = self.rng
        a, b = self.problems[p]
        progress = step / max(1, total_steps)
        reflective = rng.random() < 0.05 + 0.45 * progress
        correct = rng.random() < 0.2 + 0.6 * progress + (0.1 if reflective else 0.0)
        answer = a + b if correct else a + b + rng.choice([-10, -1, 1, 10])
        parts = [f"<think>\nWe need {a} + {b}. {self._words(rng.randint(8, 40))}."]
        parts.append(f"{a} + {b} = {answer}.")
        if reflective:
            parts.append(f"{rng.choice(REFLECTIONS)} {self._words(rng.randint(4, 20))}. {a} + {b} = {answer}.")
        if self.lengths == "realistic":
            parts.append(
                self._padding(realistic_length(rng, median_tokens=self.median_tokens, cap_tokens=self.cap_tokens))
            )
        parts.append(f"{self._words(rng.randint(0, 20))}\n</think>\nThe answer is $\\boxed{{{answer}}}$.")
        return " ".join(parts), correct, reflective

    def _padding(self, tokens: int) -> str:
        """About ``tokens`` tokens of reasoning-like words: runs from a pool (making 12 KB word by word would take a
        bench longer than its database does)."""
        if not self._chunks:
            self._chunks = [self._words(64) for _ in range(4096)]  # ~64 words, ~300 bytes each
        target, parts, size, rng = tokens * BYTES_PER_TOKEN, [], 0, self.rng
        while size < target:
            chunk = self._chunks[rng.randrange(len(self._chunks))]
            parts.append(chunk)
            size += len(chunk) + 1
        return " ".join(parts)[:target]

    def step_rows(self, step: int, total_steps: int, batch: int) -> list[dict]:
        """One generation batch: ``batch // G`` prompts, G completions each, rewards and TRL's advantages."""
        rng, G = self.rng, self.G
        rows = []
        for g in range(batch // G):
            p = rng.randrange(len(self.problems))
            group = []
            for k in range(G):
                text, correct, _ = self.completion(p, step, total_steps)
                fmt = 1.0 if rng.random() < 0.3 + 0.7 * step / max(1, total_steps) else 0.0
                digits = round(rng.random(), 3)
                rewards = [1.0 if correct else 0.0, fmt, digits]
                reward = sum(r * w for r, w in zip(rewards, REWARD_WEIGHTS))
                length = max(1, len(text) // 4)
                group.append(
                    {
                        "index": g * G + k,
                        "group": g,
                        "prompt": self.prompt(p),
                        "completion": text,
                        "rewards": rewards,
                        "reward": reward,
                        "length": length,
                        "truncated": rng.random() < 0.03,
                        "columns": {"answer": str(sum(self.problems[p]))},
                    }
                )
            values = [r["reward"] for r in group]
            mean = sum(values) / G
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (G - 1))
            for r in group:
                r["advantage"] = (r["reward"] - mean) / (std + 1e-4)
            rows.extend(group)
        return rows


def rollout_events(
    total_rows: int, *, batch: int = 1024, num_generations: int = 8, seed: int = 0, lengths: str = "short"
):
    """Event-log events ("rollouts" and "metrics") holding ``total_rows`` completions of ``lengths``."""
    gen = Generator(seed=seed, num_generations=num_generations, lengths=lengths)
    steps = -(-total_rows // batch)
    done = 0
    for step in range(1, steps + 1):
        n = min(batch, total_rows - done)
        rows = gen.step_rows(step, steps, n)
        done += len(rows)
        yield {
            "type": "rollouts",
            "ts": 0.0,
            "step": step,
            "num_generations": num_generations,
            "reward_names": REWARD_NAMES,
            "rows": rows,
        }
        yield {
            "type": "metrics",
            "ts": 0.0,
            "step": step,
            "metrics": {"reward": sum(r["reward"] for r in rows) / len(rows), "loss": 0.0},
        }
