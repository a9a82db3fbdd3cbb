"""Build a tiny Qwen2-style causal LM and a byte-level BPE tokenizer, entirely offline.

The result is an ordinary Hugging Face model folder (``save_pretrained``), so the training program loads it through
``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained`` exactly as it would load a real checkpoint or hub id.
No Django here: the web side calls :func:`build_tiny_model` from a management command.
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _corpus() -> list[str]:
    """Text the tokenizer learns its merges from: the shapes of the demo data and of R1-style answers."""
    from runs.datasets.demo_data import arithmetic_rows, word_problem_rows

    lines = [f"{r['question']} {r['answer']}" for r in word_problem_rows(300, seed=1)]
    for row in arithmetic_rows(500, seed=1):
        lines.append(row["prompt"])
        lines.append(f"<think>{row['prompt']} Wait, let me check. Actually</think> \\boxed{{{row['answer']}}}")
    lines.append("How many r in strawberry? Let me reconsider, I made an error. Verify the answer.")
    return lines


def build_tiny_model(out_dir: str | Path, *, vocab_size: int = 1024, hidden_size: int = 64, layers: int = 2,
                     seed: int = 0) -> Path:
    """Write a randomly initialised tiny Qwen2 and its tokenizer to ``out_dir``; return the folder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    tok = Tokenizer(models.BPE())
    # Digits split one by one, as Qwen2 and Llama tokenizers do.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    (out / "grpo_web.json").write_text(json.dumps({"kind": "tiny-qwen2", "seed": seed, "hidden_size": hidden_size,
                                                    "layers": layers, "vocab_size": len(tokenizer)}))
    return out


if __name__ == "__main__":  # python -m workers.tinymodel OUT_DIR
    import sys

    print(build_tiny_model(sys.argv[1]))
