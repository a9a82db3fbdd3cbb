"""Every bench runs in CI: its quick mode (the same code path on small data) completes and prints its figures in the
documented form (bench/registry.py: the last line's names in order, each with a number). Never a timing: the values
of a quick run say nothing about speed. A bench CI cannot run here says why in the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.registry import BENCHES
from tests.bench.quick import arguments, quick

HELPERS = {"__main__", "registry", "pgdb", "synthetic", "webapp"}  # bench/ modules that are no bench


@pytest.mark.parametrize("bench", [b for b in BENCHES if not b.quick_ci], ids=lambda b: b.name)
def test_the_bench_runs_quick_and_prints_its_figures(bench):
    result = quick(bench, *arguments(bench))
    assert result.problems == [], result.output
    assert set(result.values) == {f.name for f in bench.figures}


def test_every_bench_is_in_the_registry_and_ci_runs_it_or_says_why():
    modules = {p.stem for p in (Path(__file__).resolve().parents[2] / "bench").glob("*.py")} - HELPERS
    assert modules == {b.name for b in BENCHES}
    for bench in BENCHES:
        assert bench.figures and set(bench.line) <= {f.name for f in bench.figures}, bench.name
        assert bench.quick_ci == "" or len(bench.quick_ci) > 20, bench.name  # a reason, not a word
