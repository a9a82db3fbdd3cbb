"""One generation batch as TRL scored it, read back from what TRL itself recorded in ``trainer._logs`` during
``_generate_and_score_completions`` (prompts, completions, per-function rewards, advantages): the advantages are
TRL's, never recomputed. grpo-web's own training program (workers.training.capture) and the attach client both
capture through ``capture_batch``."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path


def clean(value):
    """JSON has no NaN/inf: store them as None (nested lists and dicts included)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def _unwritable(value) -> str:
    """What JSON cannot hold (an image a multimodal tool returned, kept in TRL's logs) is written as its type's name:
    a value the spool cannot write must never stop the user's training."""
    return f"<{type(value).__module__}.{type(value).__name__}>"


def event_line(type_: str, **fields) -> bytes:
    """One event-log line: ``{"type": ..., "ts": ..., ...}`` and a newline."""
    event = {"type": type_, "ts": time.time(), **fields}
    return (json.dumps(clean(event), allow_nan=False, default=_unwritable) + "\n").encode()


class SpoolWriter:
    """Appends events to an event log (JSON lines), flushed after each, safe to share between threads."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab")
        self._lock = threading.Lock()

    def write(self, type_: str, **fields) -> None:
        line = event_line(type_, **fields)
        with self._lock:
            self._fh.write(line)
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def spool_lock(folder: Path):
    """An exclusive lock on the spool folder ``folder`` (its ``lock`` file, open: closing it lets go), or None when
    another process holds it: two writers never share a spool. Where there is no fcntl (Windows) there is no lock."""
    try:
        import fcntl
    except ImportError:
        return open(os.devnull, "wb")
    fh = open(folder / "lock", "a+b")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


class NullWriter:
    """What a process that is not the main one writes to: nothing (the capture gathers to the main process)."""

    path = None

    def write(self, type_: str, **fields) -> None:
        pass

    def close(self) -> None:
        pass


def is_truncated(ids, eos_token_ids: list[int]):
    """TRL's own test: a completion is truncated when it holds none of the model's EOS ids (the tokenizer's and the
    generation config's: Qwen2.5 and Llama-3 instruct models declare several), as its clipped_ratio counts them."""
    import torch

    return ~torch.isin(ids, torch.tensor(eos_token_ids, device=ids.device)).any(dim=1)  # (B,)


def completion_lengths(ids, completion_mask, eos_token_ids: list[int], mask_truncated: bool):
    """(B,) tokens per completion: up to and with the first EOS, as TRL counts them in its completion mask."""
    import torch

    lengths = completion_mask.sum(dim=1)  # (B,)
    if mask_truncated:
        # TRL zeroes the mask of a truncated completion (no loss on it); it still ran to the longest length
        lengths = torch.where(is_truncated(ids, eos_token_ids), torch.full_like(lengths, ids.size(1)), lengths)
    return lengths


def capture_batch(trainer, inputs: list[dict], output: dict, events, fresh_columns: set[str]) -> int:
    """Write one generation batch of ``trainer`` (a TRL GRPOTrainer, right after its
    ``_generate_and_score_completions`` returned ``output`` for ``inputs``) as a "rollouts" event to ``events``.

    Every process calls it (it gathers across processes); only the main one writes. ``fresh_columns``: the
    ``log_extra`` columns logged for this batch (TRL extends a column's deque only in the batches it was logged for:
    the rest hold an earlier batch's values). Returns the batch's completion tokens, all processes together."""
    from accelerate.utils import gather_object

    local_count = len(inputs)
    # the columns any process logged for this batch (TRL flushes the union)
    fresh = set(gather_object(sorted(fresh_columns)))
    # the row's own columns (answer, ...): what the reward functions saw beside the completion
    columns = gather_object([{k: v for k, v in x.items() if k != "prompt"} for x in inputs])
    ids = output["completion_ids"]  # (B_local, T), right-padded to the longest completion
    truncated = is_truncated(ids, trainer.eos_token_ids)  # (B_local,)
    lengths = completion_lengths(
        ids, output["completion_mask"], trainer.eos_token_ids, trainer.mask_truncated_completions
    )  # (B_local,)
    lengths = trainer.accelerator.gather(lengths).tolist()
    has_eos = trainer.accelerator.gather(~truncated).tolist()
    tokens = int(sum(lengths))
    if not trainer.accelerator.is_main_process:
        return tokens
    n = local_count * trainer.accelerator.num_processes
    logs = trainer._logs
    prompts = list(logs["prompt"])[-n:]
    completions = list(logs["completion"])[-n:]
    advantages = list(logs["advantages"])[-n:]
    per_func = [list(logs["rewards"][name])[-n:] for name in trainer.reward_func_names]
    # what reward functions logged per completion with TRL's log_extra (code_tests: each test's outcome),
    # kept beside the row's columns for the rollout browser; per-step (process) scores go to a field of their own.
    extra = {col: values for col, values in logs.get("extra", {}).items() if col in fresh}
    logged = {col: list(values)[-n:] for col, values in extra.items() if len(values) >= n and col != "step_scores"}
    step_scores = list(extra["step_scores"])[-n:] if "step_scores" in extra else [None] * n
    if len(step_scores) < n:
        step_scores = [None] * (n - len(step_scores)) + step_scores
    weights = trainer.reward_weights.tolist()
    G = trainer.num_generations
    rows = []
    for i in range(n):
        rewards = [per_func[k][i] for k in range(len(per_func))]
        finite = [(r, w) for r, w in zip(rewards, weights) if r == r]  # NaN != NaN: None from the function
        rows.append(
            {
                "index": i,
                "group": i // G,
                "prompt": prompts[i],
                "completion": completions[i],
                "rewards": rewards,
                "reward": sum(r * w for r, w in finite) if finite else None,
                "advantage": advantages[i],
                "length": int(lengths[i]),
                "truncated": not has_eos[i],
                "columns": {**{col: values[i] for col, values in logged.items()}, **columns[i]},
                "step_scores": step_scores[i],
            }
        )
    # The batch trains the optimizer step that follows: TRL's completions table labels it the same way.
    events.write(
        "rollouts",
        step=trainer.state.global_step + 1,
        num_generations=G,
        reward_names=list(trainer.reward_func_names),
        rows=rows,
    )
    return tokens
