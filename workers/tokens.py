"""Token-level capture: per token of a sample of each generation batch's groups, the values TRL computed inside
``GRPOTrainer._compute_loss`` for the update, written beside the run as one Parquet shard per optimizer step.

Nothing here recomputes a value. The tensors are TRL's own objects, read where TRL left them:

- ``old_per_token_logps`` (the policy at generation: TRL's ``per_token_logps.detach()`` when it skipped computing
  them), ``per_token_logps`` and ``entropies`` (the policy at the update), ``coef_1`` (the importance ratio) and
  ``is_low_clipped`` / ``is_high_clipped`` / ``is_region_clipped`` (``is_cispo_clipped`` under cispo) are locals of
  ``_compute_loss``: they are read from its frame as it returns (a profile hook armed only after the model's forward,
  so the forward itself runs untraced);
- ``ref_per_token_logps`` (beta > 0) and ``sampling_per_token_logps`` (vLLM) come from the batch TRL built in
  ``_generate_and_score_completions``.

Rows are found again after TRL shuffles and splits the generation batch by a tensor added to that batch
(:data:`ROW_KEY`): each row's index in the generation batch, as the rollouts in the event log are numbered.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it is used: the page's tests read shards without it
    import torch

ROW_KEY = "grpo_web_row"  # (B,) added to TRL's batch: the row's index in the whole generation batch

# per-token columns of a shard, each a list per completion (None where TRL had no such tensor)
VALUES = ("logprob", "old_logprob", "sampling_logprob", "ref_logprob", "entropy", "ratio")
FLAGS = ("clipped_low", "clipped_high", "clipped")

# the locals of TRL's _compute_loss read at its return, by the column they fill
LOCALS = {"logprob": "per_token_logps", "old_logprob": "old_per_token_logps", "entropy": "entropies",
          "ratio": "coef_1", "clipped_low": "is_low_clipped", "clipped_high": "is_high_clipped",
          "clipped": "is_region_clipped"}
WANTED = set(LOCALS.values()) | {"mask", "is_cispo_clipped"}


def is_truncated(ids: "torch.Tensor", eos_token_ids: list[int]) -> "torch.Tensor":
    """TRL's own test: a completion is truncated when it holds none of the model's EOS ids (the tokenizer's and the
    generation config's: Qwen2.5 and Llama-3 instruct models declare several), as its clipped_ratio counts them."""
    import torch

    return ~torch.isin(ids, torch.tensor(eos_token_ids, device=ids.device)).any(dim=1)  # (B,)


def completion_lengths(ids: "torch.Tensor", completion_mask: "torch.Tensor", eos_token_ids: list[int],
                       mask_truncated: bool) -> "torch.Tensor":
    """(B,) tokens per completion: up to and with the first EOS, as TRL counts them in its completion mask."""
    import torch

    lengths = completion_mask.sum(dim=1)  # (B,)
    if mask_truncated:
        # TRL zeroes the mask of a truncated completion (no loss on it); it still ran to the longest length
        lengths = torch.where(is_truncated(ids, eos_token_ids), torch.full_like(lengths, ids.size(1)), lengths)
    return lengths


def shard_name(step: int) -> str:
    return f"step-{step:06d}.parquet"


def shard_schema():
    import pyarrow as pa

    floats, flags = pa.list_(pa.float32()), pa.list_(pa.bool_())
    return pa.schema([
        ("step", pa.int32()),  # the rollout's step: the generation batch's, as in the event log and the Rollout table
        ("update_step", pa.int32()),  # the optimizer step whose loss computed these values (this shard's step)
        ("index", pa.int32()),  # the rollout's index in its generation batch
        ("group", pa.int32()),  # index // num_generations
        ("completion", pa.int32()),  # index % num_generations: the completion's place in its group
        ("token_ids", pa.list_(pa.int32())),
        ("tokens", pa.list_(pa.string())),  # each token decoded alone
        ("mask", flags),  # TRL's loss mask: the token counted in the loss
        *[(name, floats) for name in VALUES],
        *[(name, flags) for name in FLAGS],
    ])


def sampled_groups(num_groups: int, setting: int) -> int:
    """How many groups of a batch of ``num_groups`` are captured: the first ``setting`` (TRL's sampler already
    shuffled the prompts), all of them for -1 or more than there are, none for 0."""
    return num_groups if setting < 0 else min(setting, num_groups)


class TokenCapture:
    """Held by the capturing trainer: tags each generation batch, reads TRL's tensors at each update of a sampled
    row, and writes a shard per optimizer step (rank 0, the other ranks' rows gathered to it)."""

    def __init__(self, trainer, tokens_dir: str | Path, sample_groups: int):
        self.trainer = trainer
        self.dir = Path(tokens_dir)
        self.sample_groups = sample_groups
        self.batch_step = 0
        self.sampled_rows = 0  # rows [0, sampled_rows) of the current generation batch are captured
        self.rows: list[dict] = []  # captured during the current optimizer step
        self._seen: dict | None = None
        self._armed = False

    # --- generation: tag the batch -------------------------------------------------------------------------------

    def tag(self, output: dict, step: int) -> None:
        """Number the local rows of TRL's batch by their index in the whole generation batch (the rollouts' index)."""
        import torch

        trainer = self.trainer
        local = output["completion_ids"].size(0)
        start = trainer.accelerator.process_index * local
        output[ROW_KEY] = torch.arange(start, start + local, device=output["completion_ids"].device)  # (B_local,)
        groups = local * trainer.accelerator.num_processes // trainer.num_generations
        self.sampled_rows = sampled_groups(groups, self.sample_groups) * trainer.num_generations
        self.batch_step = step

    # --- the update: arm, read, keep ------------------------------------------------------------------------------

    def wants(self, inputs: dict) -> bool:
        rows = inputs.get(ROW_KEY)
        return rows is not None and self.sampled_rows > 0 and bool((rows < self.sampled_rows).any())

    def arm(self) -> None:
        """Called right after TRL's forward in _compute_loss (its _get_per_token_logps_and_entropies with
        compute_entropy): read the locals of that _compute_loss frame when it returns."""
        if not self._armed:
            return
        self._armed = False
        from trl import GRPOTrainer

        code = GRPOTrainer._compute_loss.__code__
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        if frame is None:
            return
        target, previous, seen = frame, sys.getprofile(), {}

        def on_return(f, event, arg):
            if event == "return" and f is target:
                seen.update({k: v for k, v in f.f_locals.items() if k in WANTED})
                sys.setprofile(previous)

        self._seen = seen
        sys.setprofile(on_return)

    def around_loss(self, compute, inputs: dict):
        """Run TRL's _compute_loss (``compute``); when the micro-batch holds sampled rows, keep their values."""
        if not self.wants(inputs):
            return compute()
        self._armed, self._seen = True, None
        try:
            loss = compute()
        finally:
            self._armed = False
        if self._seen:
            self._keep(inputs, self._seen)
        self._seen = None
        return loss

    def _keep(self, inputs: dict, seen: dict) -> None:
        import torch

        trainer = self.trainer
        rows = inputs[ROW_KEY]
        pick = (rows < self.sampled_rows).nonzero().squeeze(1)  # (k,) positions of sampled rows in the micro-batch
        ids = inputs["completion_ids"]  # (B, T)
        T = ids.size(1)
        lengths = completion_lengths(ids, inputs["completion_mask"], trainer.eos_token_ids,
                                     trainer.mask_truncated_completions)[pick].tolist()
        clipped = {"clipped_low": seen.get("is_low_clipped"), "clipped_high": seen.get("is_high_clipped"),
                   "clipped": seen.get("is_region_clipped", seen.get("is_cispo_clipped"))}
        tensors = {name: seen.get(LOCALS[name]) for name in ("logprob", "old_logprob", "entropy", "ratio")}
        tensors["sampling_logprob"] = inputs.get("sampling_per_token_logps")
        tensors["ref_logprob"] = inputs.get("ref_per_token_logps") if trainer.beta != 0.0 else None
        tensors.update(clipped)
        tensors["mask"] = seen.get("mask")

        def rows_of(t):  # (k, T) on the CPU; a sequence-level tensor (B, 1) is TRL's one value for every token
            if t is None:
                return None
            t = t.detach()[pick]
            return (t.expand(-1, T) if t.size(1) == 1 else t).cpu()

        host = {name: rows_of(t) for name, t in tensors.items()}
        token_ids = ids[pick].cpu()
        indices = rows[pick].tolist()
        step = trainer.state.global_step + 1
        G = trainer.num_generations
        for j, index in enumerate(indices):
            n = lengths[j]
            row = {"step": self.batch_step, "update_step": step, "index": index, "group": index // G,
                   "completion": index % G, "token_ids": token_ids[j, :n].tolist()}
            for name, t in host.items():
                if t is None:
                    row[name] = None
                elif t.dtype == torch.bool:
                    row[name] = t[j, :n].tolist()
                elif name == "mask":
                    row[name] = t[j, :n].bool().tolist()
                else:
                    row[name] = t[j, :n].float().tolist()
            self.rows.append(row)

    # --- the end of an optimizer step: one shard ------------------------------------------------------------------

    def flush(self, step: int) -> Path | None:
        """Write the rows captured during optimizer step ``step`` to its shard (rank 0); None when there are none."""
        trainer = self.trainer
        rows, self.rows = self.rows, []
        if trainer.accelerator.num_processes > 1:
            from accelerate.utils import gather_object

            rows = gather_object(rows)
        if not rows or not trainer.accelerator.is_main_process:
            return None
        # each token decoded alone, as the page shows it; once per step, off the loss computation
        ids = [[t] for row in rows for t in row["token_ids"]]
        texts = iter(trainer.processing_class.batch_decode(ids)) if ids else iter(())
        for row in rows:
            row["tokens"] = [next(texts) for _ in row["token_ids"]]
        return write_shard(self.dir, step, rows)


def write_shard(directory: Path, step: int, rows: list[dict]) -> Path:
    """Rows (one per completion and update) into ``<directory>/step-NNNNNN.parquet``, written whole or not at all:
    a reader never sees half a file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: (r["step"], r["index"]))
    table = pa.Table.from_pylist(rows, schema=shard_schema())
    path = directory / shard_name(step)
    tmp = directory / f".{path.name}.{os.getpid()}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path
