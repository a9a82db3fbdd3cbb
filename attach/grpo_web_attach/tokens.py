"""Token-level capture: per token of a sample of each generation batch's groups, the values TRL computed inside
``GRPOTrainer._compute_loss`` for the update, written beside the run as one Parquet shard per optimizer step.

Nothing here recomputes a value. The tensors are TRL's own objects, read where TRL left them:

- ``old_per_token_logps`` (the policy at generation: TRL's ``per_token_logps.detach()`` when it skipped computing
  them), ``per_token_logps`` and ``entropies`` (the policy at the update), ``coef_1`` (the importance ratio) and
  ``is_low_clipped`` / ``is_high_clipped`` / ``is_region_clipped`` (``is_cispo_clipped`` under cispo) are locals of
  ``_compute_loss``: its frame is held from just after the model's forward, and they are read from it once it has
  returned (nothing traces the loss code);
- ``ref_per_token_logps`` (beta > 0) and ``sampling_per_token_logps`` (vLLM) come from the batch TRL built in
  ``_generate_and_score_completions``.

Rows are found again after TRL shuffles and splits the generation batch by a tensor added to that batch
(:data:`ROW_KEY`): each row's index in the generation batch, as the rollouts in the event log are numbered.

Both ways a run reaches grpo-web capture through this module: grpo-web's own training program
(workers.training.capture writes the shards into ``<run_dir>/tokens/``) and the attach client (``attach(...,
token_sample_groups=N)`` writes them into its spool, ``<output_dir>/grpo-web-spool/tokens/``, and its sender uploads
each one). :func:`shard_schema` is also what the server checks an uploaded shard against.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from pathlib import Path

from grpo_web_attach.capture import completion_lengths

ROW_KEY = "grpo_web_row"  # (B,) added to TRL's batch: the row's index in the whole generation batch

# per-token columns of a shard, each a list per completion (None where TRL had no such tensor)
VALUES = ("logprob", "old_logprob", "sampling_logprob", "ref_logprob", "entropy", "ratio")
FLAGS = ("clipped_low", "clipped_high", "clipped")

# the locals of TRL's _compute_loss read at its return, by the column they fill
LOCALS = {
    "logprob": "per_token_logps",
    "old_logprob": "old_per_token_logps",
    "entropy": "entropies",
    "ratio": "coef_1",
    "clipped_low": "is_low_clipped",
    "clipped_high": "is_high_clipped",
    "clipped": "is_region_clipped",
}
WANTED = set(LOCALS.values()) | {"mask", "is_cispo_clipped"}


def shard_name(step: int) -> str:
    return f"step-{step:06d}.parquet"


def shard_schema():
    import pyarrow as pa

    floats, flags = pa.list_(pa.float32()), pa.list_(pa.bool_())
    return pa.schema(
        [
            (
                "step",
                pa.int32(),
            ),  # the rollout's step: the generation batch's, as in the event log and the Rollout table
            ("update_step", pa.int32()),  # the optimizer step whose loss computed these values (this shard's step)
            ("index", pa.int32()),  # the rollout's index in its generation batch
            ("group", pa.int32()),  # index // num_generations
            ("completion", pa.int32()),  # index % num_generations: the completion's place in its group
            ("token_ids", pa.list_(pa.int32())),
            ("tokens", pa.list_(pa.string())),  # each token decoded alone
            ("mask", flags),  # TRL's loss mask: the token counted in the loss
            *[(name, floats) for name in VALUES],
            *[(name, flags) for name in FLAGS],
        ]
    )


def sampled_groups(num_groups: int, setting: int) -> int:
    """How many groups of a batch of ``num_groups`` are captured: the first ``setting`` (TRL's sampler already
    shuffled the prompts), all of them for -1 or more than there are, none for 0."""
    return num_groups if setting < 0 else min(setting, num_groups)


class TokenCapture:
    """Held by the capturing trainer (or the attach client), hooked into it by :meth:`hook`: tags each generation
    batch, reads TRL's tensors at each update of a sampled row, and writes a shard per optimizer step (rank 0, the
    other ranks' rows gathered to it).

    The training thread does the least it can: at each update it copies the sampled rows of TRL's tensors to the CPU
    (one indexed copy per tensor, no per-token Python); at the end of the optimizer step it decodes the token ids it
    has not seen before and hands the step to a writer thread, which builds the Parquet shard from the tensors and
    writes it. :meth:`close` (the trainer's ``train`` or the attach client's end calls it, on success and on failure)
    waits for the last shard."""

    def __init__(self, trainer, tokens_dir: str | Path, sample_groups: int):
        self.trainer = trainer
        self.dir = Path(tokens_dir)
        self.sample_groups = sample_groups
        self.batch_step = 0
        self.sampled_rows = 0  # rows [0, sampled_rows) of the current generation batch are captured
        self.chunks: list[dict] = []  # one per micro-batch update of the current optimizer step
        self.texts: dict[int, str] = {}  # token id -> the token decoded alone; grows on the training thread only
        self._frame = None  # TRL's _compute_loss frame of the update being captured
        self._armed = False
        self._writer: ShardWriter | None = None
        import pyarrow.parquet  # noqa: F401 - imported now, before training, rather than inside a step

    def hook(self) -> None:
        """Wrap, on the trainer instance, the three TRL methods the capture reads at: the generation batch (tagged once
        TRL has built it), the loss (its values kept as it returns) and the forward inside the loss (the frame held).
        Only while the model trains: an evaluation's generation and loss are not the update's."""
        trainer, capture = self.trainer, self
        generate_and_score = trainer._generate_and_score_completions
        compute_loss = trainer._compute_loss
        logps_and_entropies = trainer._get_per_token_logps_and_entropies

        def _generate_and_score_completions(inputs):
            output = generate_and_score(inputs)
            if trainer.model.training:
                capture.tag(output, step=trainer.state.global_step + 1)
            return output

        def _compute_loss(model, inputs):
            if not trainer.model.training:
                return compute_loss(model, inputs)
            return capture.around_loss(lambda: compute_loss(model, inputs), inputs)

        def _get_per_token_logps_and_entropies(*args, **kwargs):
            out = logps_and_entropies(*args, **kwargs)
            if kwargs.get("compute_entropy"):
                capture.arm()  # the forward of _compute_loss is done: read its values as it returns
            return out

        trainer._generate_and_score_completions = _generate_and_score_completions
        trainer._compute_loss = _compute_loss
        trainer._get_per_token_logps_and_entropies = _get_per_token_logps_and_entropies

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
        compute_entropy): hold that _compute_loss frame, whose locals are read once it has returned.

        A frame object still referenced when its function returns keeps the locals it returned with, so nothing
        traces the loss code (no profile or trace hook): the values are TRL's final ones, read after the fact."""
        if not self._armed:
            return
        self._armed = False
        from trl import GRPOTrainer

        code = GRPOTrainer._compute_loss.__code__
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        self._frame = frame

    def around_loss(self, compute, inputs: dict):
        """Run TRL's _compute_loss (``compute``); when the micro-batch holds sampled rows, keep their values."""
        if not self.wants(inputs):
            return compute()
        self._armed, self._frame = True, None
        try:
            loss = compute()
            if self._frame is not None:
                local = self._frame.f_locals  # as _compute_loss returned
                self._keep(inputs, {k: v for k, v in local.items() if k in WANTED})
        finally:
            self._armed, self._frame = False, None  # let go of the frame (and all its tensors) now
        return loss

    def _keep(self, inputs: dict, seen: dict) -> None:
        """The sampled rows of each tensor, copied to the CPU as they are; the writer thread makes them rows."""
        trainer = self.trainer
        rows = inputs[ROW_KEY]
        pick = (rows < self.sampled_rows).nonzero().squeeze(1)  # (k,) positions of sampled rows in the micro-batch
        ids = inputs["completion_ids"]  # (B, T)
        lengths = completion_lengths(
            ids, inputs["completion_mask"], trainer.eos_token_ids, trainer.mask_truncated_completions
        )  # (B,)
        tensors = {name: seen.get(LOCALS[name]) for name in ("logprob", "old_logprob", "entropy", "ratio")}
        tensors["sampling_logprob"] = inputs.get("sampling_per_token_logps")
        tensors["ref_logprob"] = inputs.get("ref_per_token_logps") if trainer.beta != 0.0 else None
        tensors.update(
            {
                "clipped_low": seen.get("is_low_clipped"),
                "clipped_high": seen.get("is_high_clipped"),
                "clipped": seen.get("is_region_clipped", seen.get("is_cispo_clipped")),
                "mask": seen.get("mask"),
            }
        )
        # indexing copies (k, T) or (k, 1) out of TRL's tensor, so nothing TRL does later can change what is kept
        self.chunks.append(
            {
                "step": self.batch_step,
                "update_step": trainer.state.global_step + 1,
                "index": rows[pick].cpu(),
                "length": lengths[pick].cpu(),
                "token_ids": ids[pick].cpu(),
                "values": {name: None if t is None else t.detach()[pick].cpu() for name, t in tensors.items()},
            }
        )

    # --- the end of an optimizer step: one shard ------------------------------------------------------------------

    def flush(self, step: int) -> None:
        """Hand the values captured during optimizer step ``step`` to the writer thread (rank 0; the other ranks'
        gathered to it). Raises here, on the training thread, what the writer failed at with an earlier shard."""
        trainer = self.trainer
        chunks, self.chunks = self.chunks, []
        if trainer.accelerator.num_processes > 1:
            from accelerate.utils import gather_object

            chunks = gather_object(chunks)
        if not chunks or not trainer.accelerator.is_main_process:
            return
        self._decode_new(chunks)
        if self._writer is None:
            self._writer = ShardWriter(self.dir, self.texts, self.trainer.num_generations)
        self._writer.put(step, chunks)

    def _decode_new(self, chunks: list[dict]) -> None:
        """Each token id not seen before, decoded alone as the page shows it, in one call of the tokenizer. It runs
        here rather than in the writer: a fast tokenizer used from two threads at once can fail ("Already
        borrowed") while TRL tokenizes on this one."""
        import torch

        ids = torch.unique(torch.cat([c["token_ids"].flatten() for c in chunks])).tolist()
        new = [i for i in ids if i not in self.texts]
        if new:
            self.texts.update(zip(new, self.trainer.processing_class.batch_decode([[i] for i in new])))

    def close(self, raise_error: bool = True) -> None:
        """Wait for the shards handed to the writer to be written; raise what it failed at (unless told not to,
        when training has already failed and that error is the one to report)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close(raise_error)


class ShardWriter:
    """A thread writing the shards handed to it, in order: tensors to Arrow columns, Parquet, atomic rename."""

    def __init__(self, directory: Path, texts: dict[int, str], num_generations: int):
        self.directory, self.texts, self.G = directory, texts, num_generations
        self.queue: queue.Queue = queue.Queue(maxsize=4)  # a writer this far behind slows training, not memory
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="token-shard-writer", daemon=True)
        self.thread.start()

    def put(self, step: int, chunks: list[dict]) -> None:
        self._raise()
        self.queue.put((step, chunks))

    def close(self, raise_error: bool = True) -> None:
        self.queue.put(None)
        self.thread.join()
        if raise_error:
            self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise RuntimeError("writing a token shard failed") from error

    def _run(self) -> None:
        while (item := self.queue.get()) is not None:
            if self.error is None:  # after a failure, drain without writing: the training thread raises it
                try:
                    self.write(*item)
                except BaseException as exc:  # noqa: BLE001 - handed to the training thread
                    self.error = exc

    def write(self, step: int, chunks: list[dict]) -> Path:
        import pyarrow as pa

        return write_table(self.directory, step, pa.concat_tables([chunk_table(c, self.texts, self.G) for c in chunks]))


def chunk_table(chunk: dict, texts: dict[int, str], G: int):
    """One micro-batch's kept tensors as shard rows: each (k, T) tensor cut to each completion's length."""
    import numpy as np
    import pyarrow as pa
    import torch

    schema = shard_schema()
    lengths = chunk["length"]  # (k,)
    k, T = chunk["token_ids"].shape
    keep = torch.arange(T) < lengths.unsqueeze(1)  # (k, T): the completion's tokens, row after row once flattened
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths.numpy())]), pa.int32())  # (k + 1,)

    def tokens_of(t, column):  # (k, T) or (k, 1) -> a list per completion
        if t is None:
            return pa.nulls(k, schema.field(column).type)
        if t.size(1) == 1:  # a sequence-level tensor (B, 1): TRL's one value for every token
            t = t.expand(-1, T)
        flat = t[keep]
        flat = flat.bool() if schema.field(column).type.value_type == pa.bool_() else flat.float()  # float32, exact
        return pa.ListArray.from_arrays(offsets, pa.array(flat.numpy()))

    index = chunk["index"].to(torch.int32).numpy()
    flat_ids = chunk["token_ids"][keep]  # (n,) the completions' tokens one after another
    uniq, inverse = torch.unique(flat_ids, return_inverse=True)
    columns = {
        "step": pa.array(np.full(k, chunk["step"], np.int32)),
        "update_step": pa.array(np.full(k, chunk["update_step"], np.int32)),
        "index": pa.array(index),
        "group": pa.array(index // G),
        "completion": pa.array(index % G),
        "token_ids": pa.ListArray.from_arrays(offsets, pa.array(flat_ids.to(torch.int32).numpy())),
        "tokens": pa.ListArray.from_arrays(
            offsets, pa.array([texts[i] for i in uniq.tolist()], pa.string()).take(pa.array(inverse.numpy()))
        ),  # the texts of the distinct ids, then one take: Python per id, not per token
    }
    columns.update({name: tokens_of(t, name) for name, t in chunk["values"].items()})
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def write_shard(directory: Path, step: int, rows: list[dict]) -> Path:
    """Rows (one per completion and update, as dicts) into ``<directory>/step-NNNNNN.parquet``."""
    import pyarrow as pa

    return write_table(directory, step, pa.Table.from_pylist(rows, schema=shard_schema()))


def write_table(directory: Path, step: int, table) -> Path:
    """A shard's table, its rows ordered by (step, index), into ``<directory>/step-NNNNNN.parquet``, written whole
    or not at all: a reader never sees half a file."""
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    table = table.sort_by([("step", "ascending"), ("index", "ascending")])
    path = directory / shard_name(step)
    tmp = directory / f".{path.name}.{os.getpid()}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path
