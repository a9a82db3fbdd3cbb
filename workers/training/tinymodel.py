"""Build a tiny Qwen2-style causal LM and a byte-level BPE tokenizer, entirely offline.

The result is an ordinary Hugging Face model folder (``save_pretrained``), so the training program loads it through
``AutoModelForCausalLM`` / ``AutoTokenizer.from_pretrained`` exactly as it would load a real checkpoint or hub id.
No Django here: the web side calls :func:`build_tiny_model` from a management command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grpo_web_protocol.demo_data import arithmetic_rows, arithmetic_tool_rows, word_problem_rows
from jinja2 import Template

from rewards.library import source
from rewards.toolspec import stand_in, tool_signature

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen2.5's tool-call markup: plain added tokens there too (decoded, so TRL's response parser sees them)
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


# Qwen2.5's tool-call markup (<tool_call> JSON </tool_call>; results in <tool_response> as a user turn), with a short
# system line naming the tools instead of Qwen's long JSON-schema preamble: the tiny model reads a few dozen prompt
# tokens, not 250, which makes its cold start and a CPU run with tools several times cheaper. Prefix-preserving, as
# TRL requires for multi-turn training; the model's tool calls are parsed with TRL's Qwen response template.
TOOL_CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools:{% for tool in tools %}{% set f = tool.function if tool.function is "
    "defined else tool %} {{ f.name }}({{ f.parameters.properties | list | join(', ') }}){% endfor %}<|im_end|>\n"
    "{% endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}{{ '<|im_start|>assistant\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}{% set f = call.function if call.function is defined else call %}"
    '{{ \'<tool_call>\n{"name": "\' + f.name + \'", "arguments": \' }}'
    "{{- f.arguments if f.arguments is string else f.arguments | tojson }}{{ '}\n</tool_call>' }}{% endfor %}"
    "{{- '<|im_end|>\n' }}"
    "{%- elif message.role == 'tool' %}{{ '<|im_start|>user\n<tool_response>\n' + message.content "
    "+ '\n</tool_response><|im_end|>\n' }}"
    "{%- else %}{{ '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{% endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tool_chat_template() -> str:
    return TOOL_CHAT_TEMPLATE


def _tool_corpus() -> list[str]:
    """Text in the tool template's shape (its system line, tool calls and responses), so the tokenizer spends few
    tokens on the markup every tool conversation carries."""
    from transformers.utils import get_json_schema

    schema = get_json_schema(stand_in(tool_signature(source("calculator"), "calculator"), None))
    template = Template(tool_chat_template())
    lines = []
    for row in arithmetic_tool_rows(200, seed=3):
        expression = row["prompt"][0]["content"].removeprefix("What is ").split("?")[0]
        call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}
        messages = row["prompt"] + [
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "calculator", "content": row["answer"]},
            {"role": "assistant", "content": f"\\boxed{{{row['answer']}}}"},
        ]
        lines.append(template.render(messages=messages, tools=[schema], add_generation_prompt=False))
    return lines


def _corpus() -> list[str]:
    """Text the tokenizer learns its merges from: the shapes of the demo data and of R1-style answers."""
    lines = [f"{r['question']} {r['answer']}" for r in word_problem_rows(300, seed=1)]
    for row in arithmetic_rows(500, seed=1):
        lines.append(row["prompt"])
        lines.append(f"<think>{row['prompt']} Wait, let me check. Actually</think> \\boxed{{{row['answer']}}}")
    lines.append("How many r in strawberry? Let me reconsider, I made an error. Verify the answer.")
    return lines


def tiny_config(vocab_size: int, *, hidden_size: int, layers: int, heads: int, eos_token_id=None, pad_token_id=None):
    """The tiny model's Qwen2Config: ``heads`` attention heads and half as many key/value heads (at least one)."""
    from transformers import Qwen2Config

    if heads < 1 or hidden_size % heads:
        raise ValueError(f"hidden_size {hidden_size} does not split into {heads} heads")
    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        bos_token_id=None,
    )


def build_tiny_model(
    out_dir: str | Path,
    *,
    vocab_size: int = 1024,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    seed: int = 0,
    tools: bool = False,
) -> Path:
    """Write a randomly initialised tiny Qwen2 and its tokenizer to ``out_dir``; return the folder. ``tools``: with
    Qwen2.5's tool-calling chat template and markup tokens (the model a run with tools trains). ``heads``: attention
    heads (half as many key/value heads, at least one); the head size is ``hidden_size // heads``, and vLLM's CPU
    attention takes 32 or more (``heads=2`` at the default hidden size), where the demo's 4 heads give 16."""
    tiny_config(vocab_size, hidden_size=hidden_size, layers=layers, heads=heads)  # a bad shape fails before any work
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

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
    if tools:
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size + 128,
            special_tokens=SPECIAL_TOKENS + TOOL_TOKENS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    tok.train_from_iterator(_corpus() + (_tool_corpus() if tools else []), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
    )
    tokenizer.chat_template = tool_chat_template() if tools else CHAT_TEMPLATE
    if tools:
        from trl.chat_template_utils import qwen3_template

        tokenizer.response_template = qwen3_template  # how TRL parses the tool calls of a Qwen-style completion
    tokenizer.save_pretrained(out)

    torch.manual_seed(seed)
    config = tiny_config(
        len(tokenizer),
        hidden_size=hidden_size,
        layers=layers,
        heads=heads,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    (out / "grpo_web.json").write_text(
        json.dumps(
            {
                "kind": "tiny-qwen2",
                "seed": seed,
                "hidden_size": hidden_size,
                "layers": layers,
                "heads": heads,
                "vocab_size": len(tokenizer),
                "tools": tools,
            }
        )
    )
    return out


if __name__ == "__main__":  # python -m workers.training.tinymodel OUT_DIR
    print(build_tiny_model(sys.argv[1]))
