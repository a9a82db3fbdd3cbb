"""The quick-mode test fails when a bench breaks: the check CI runs (tests/bench/quick.py, bench.registry.check) on
a stand-in bench (tests/bench/fake_bench.py) that stops on its own check or prints its figures in another form."""

from __future__ import annotations

import pytest

from bench.registry import Bench, figures
from tests.bench.quick import quick

FAKE = Bench(
    "fake",
    figures("fake_rows_per_s >= 5", "fake_ratio"),
    ("fake_rows_per_s", "fake_ratio"),
    "a stand-in",
    module="tests.bench.fake_bench",
)


def test_a_bench_that_prints_its_figures_passes_with_its_quick_values():
    result = quick(FAKE)
    assert result.problems == []
    assert result.values == {"fake_rows_per_s": 10.0, "fake_ratio": 0.5}  # --quick's 10 rows, not a million


@pytest.mark.parametrize(
    "broken, problems",
    [
        ("check", ["fake exited with status 1", "fake's last line is '10 rows', not fake_rows_per_s=<number> "
                   "fake_ratio=<number>", "fake printed no fake_rows_per_s, fake_ratio"]),
        ("line", ["fake's last line is 'done', not fake_rows_per_s=<number> fake_ratio=<number>"]),
        ("renamed", ["fake's last line is 'fake_rows_per_s=10 fake_share=0.5', not fake_rows_per_s=<number> "
                     "fake_ratio=<number>", "fake printed no fake_ratio"]),
        ("text", ["fake's last line is 'fake_rows_per_s=fast fake_ratio=0.5', not fake_rows_per_s=<number> "
                  "fake_ratio=<number>", "fake printed no fake_rows_per_s"]),
        ("tail", ["fake's last line is 'fake_rows_per_s=10', not fake_rows_per_s=<number> fake_ratio=<number>",
                  "fake printed no fake_ratio"]),
    ],
)  # fmt: skip
def test_a_bench_that_fails_its_check_or_prints_another_line_is_reported(broken, problems):
    result = quick(FAKE, "--break", broken)
    assert result.problems == problems
