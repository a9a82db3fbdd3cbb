"""Rejection sampling through vLLM (workers.training.evaluate.VLLMGenerator), where vLLM is installed and a GPU is present: k
seeded samples and one greedy completion per prompt, at most max_tokens each, as the transformers path gives them.
Skipped elsewhere (bench/gpu_smoke.sh runs the GPU tests on a GPU machine)."""

import pytest
from grpo_web_protocol.config import EvalFields

from tests.workers.test_gpu_paths import needs

pytestmark = [pytest.mark.requires_gpu, needs(1, vllm=True)]


def _length(completions, **kwargs):
    return [float(len(c)) for c in completions]


def test_vllm_samples_k_seeded_completions_and_a_greedy_one_per_prompt(tiny_model):
    from transformers import AutoTokenizer

    from workers.training.evaluate import EvalSet, Evaluator, VLLMGenerator, vllm_usable

    assert vllm_usable(str(tiny_model))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    evaluator = Evaluator(
        EvalFields(eval_num_samples=3, eval_temperature=1.0, eval_threshold=0.0),
        EvalSet(prompts=["What is 2 + 3?", "What is 7 * 6?"], columns={}),
        [_length],
        [1.0],
        ["length"],
        max_new_tokens=8,
        top_p=0.9,
    )
    engine = VLLMGenerator(str(tiny_model), seed=0)
    body = evaluator.run(engine, tokenizer, seed=0)
    rows = body["rows"]
    assert body["samples"] == len(rows) == 2 * (3 + 1)
    assert [(r["prompt_index"], r["sample"], r["greedy"]) for r in rows] == (
        [(p, s, False) for p in range(2) for s in range(3)] + [(p, 3, True) for p in range(2)]
    )
    assert all(1 <= r["length"] <= 8 for r in rows)
    assert not any(r["truncated"] for r in rows if r["length"] < 8)  # shorter than max_tokens: EOS ended it
    again = evaluator.run(engine, tokenizer, seed=0)["rows"]
    assert [r["completion"] for r in again] == [r["completion"] for r in rows]  # the seed decides the samples
