"""What TRL's GRPOTrainer passes a reward function as ``prompts`` and ``completions``, by the dataset's shape.

TRL 1.16 (``GRPOTrainer._generate_and_score_completions``) tests the batch's first prompt with
``is_conversational``: for a standard dataset (the prompt is text) both are strings; for a conversational one (the
prompt is a list of {role, content} messages) the prompts are those lists and each completion is a list of messages,
``[{"role": "assistant", "content": text}]`` (or the turns ``parse_response`` makes, tool calls included). Every
place that calls a reward outside training (the pre-queue check, the editor's Test, the replay) passes them so, so a
reward that runs in training runs there, and one that would fail there fails here first.
"""

from __future__ import annotations


def is_conversational(prompt) -> bool:
    """TRL's ``is_conversational({"prompt": prompt})``: a list whose first item is a dict with a role."""
    return isinstance(prompt, list) and bool(prompt) and isinstance(prompt[0], dict) and "role" in prompt[0]


def trl_completions(prompts: list, texts: list[str]) -> list:
    """``texts`` as TRL passes them beside ``prompts``: as they are after a standard prompt, each as one assistant
    message after a conversational one (TRL decides on the batch's first prompt)."""
    if prompts and is_conversational(prompts[0]):
        return [[{"role": "assistant", "content": text}] for text in texts]
    return list(texts)
