"""Send a TRL GRPO run trained anywhere to grpo-web.

One line in an unmodified TRL script, after the trainer is made::

    grpo_web_attach.attach(trainer, name="my run")    # url, token: GRPO_WEB_URL, GRPO_WEB_TOKEN

or, where a script only takes callbacks (open-r1's grpo.py), ``callbacks=[grpo_web_attach.GrpoWebCallback()]``.

Every generation batch (prompts, completions, per-function rewards, TRL's advantages, group ids, lengths,
truncation, labelled with the step TRL's completions table gives it), TRL's logged metrics, checkpoints, the
GRPOConfig, the model id, the dataset's name and the reward functions' source go to a spool in
``<output_dir>/grpo-web-spool/``; a background thread sends it to the server. Training never waits for the server.
The spool is never deleted: run again from a checkpoint in the same output_dir, the script continues the same
grpo-web run (whether or not the server ever answered) and sends what the spool held first.

``token_sample_groups=N`` (or GRPO_WEB_TOKEN_SAMPLE_GROUPS; 0, the default, is off; -1 every group) also keeps, for
the first N groups of each generation batch, the per-token values TRL computed at the update (log-probabilities,
entropy, importance ratio, clipping: grpo_web_attach.tokens, as grpo-web's own training program keeps them), a
Parquet shard per optimizer step in the spool's ``tokens/``, sent like the rest, for the run's token view.
"""

from __future__ import annotations

import importlib

__all__ = ["attach", "GrpoWebCallback", "Attachment", "AttachCallback"]
_SUBMODULES = ("client", "capture", "sender", "tokens")


def __getattr__(name: str):
    # the client loads transformers (its callbacks are TrainerCallbacks): only a training script that uses it pays
    # for that; grpo-web's web process imports this package's capture and tokens modules, never the client
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(f"module 'grpo_web_attach' has no attribute {name!r}")
    client = importlib.import_module("grpo_web_attach.client")
    try:
        return getattr(client, name)
    except AttributeError:
        raise AttributeError(f"module 'grpo_web_attach' has no attribute {name!r}") from None
