"""The benches' synthetic completions come in two lengths: short rows and R1-like ones (issue 38: median about 12 KB,
one in ten past 30 KB, cut at the completion cap), still shaped as a transcript with its answer at the end."""

import re
import statistics

import pytest

from bench.synthetic import Generator, rollout_events


def sizes(gen: Generator, n: int) -> list[int]:
    return [len(gen.completion(p % 100, 5, 10)[0].encode()) for p in range(n)]


def test_realistic_completions_have_r1_like_lengths():
    lengths = sizes(Generator(seed=3, lengths="realistic"), 600)
    assert 9_000 <= statistics.median(lengths) <= 15_000
    over_30k = sum(size > 30_000 for size in lengths) / len(lengths)
    assert 0.03 <= over_30k <= 0.2, over_30k
    assert max(lengths) <= 16_000 * 4 + 2_000  # the cap, plus the transcript's head and answer


def test_the_cap_cuts_the_tail():
    lengths = sizes(Generator(seed=3, lengths="realistic", cap_tokens=4096), 300)
    assert max(lengths) <= 4096 * 4 + 2_000 and statistics.median(lengths) < 12_000


def test_a_long_completion_still_ends_with_its_boxed_answer():
    gen = Generator(seed=1, lengths="realistic")
    for p in range(20):
        text, correct, _ = gen.completion(p, 5, 10)
        a, b = gen.problems[p]
        answer = int(re.search(r"\\boxed\{(-?\d+)\}\$\.$", text).group(1))
        assert (answer == a + b) is correct
        assert text.index("</think>") > len(text) - 400


def test_short_rows_stay_short_and_events_carry_the_length():
    assert statistics.median(sizes(Generator(seed=3), 300)) < 1_000
    rows = [r for e in rollout_events(64, batch=32, lengths="realistic") for r in e.get("rows", ())]
    assert len(rows) == 64 and statistics.median(len(r["completion"]) for r in rows) > 5_000
    assert all(r["length"] == max(1, len(r["completion"]) // 4) for r in rows)


def test_an_unknown_length_is_refused():
    with pytest.raises(ValueError, match="short, realistic"):
        Generator(lengths="long")
