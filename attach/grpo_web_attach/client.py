"""The client itself: ``attach``, its callbacks and the run's sender (what ``grpo_web_attach`` gives a script).
Imported on first use, so that the server side, which shares ``grpo_web_attach.capture`` and ``grpo_web_attach.tokens``
with it, never loads transformers."""

from __future__ import annotations

import atexit
import inspect
import json
import os
import socket
import sys
from pathlib import Path

from grpo_web_attach import provenance
from grpo_web_attach.capture import NullWriter, SpoolWriter, capture_batch, spool_lock
from grpo_web_attach.sender import (
    BATCH_BYTES,
    Api,
    Sender,
    pending_shards,
    read_acked,
    shard_step,
    write_atomic,
)
from grpo_web_attach.tokens import TokenCapture

__all__ = ["attach", "GrpoWebCallback", "Attachment"]

SPOOL_DIR = "grpo-web-spool"
TOKENS_DIR = "tokens"  # in the spool: the token shards not sent yet
FLUSH_TIMEOUT_S = 60.0


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_description(trainer, name: str | None) -> dict:
    """What the server is told about the run when it is created."""
    args = trainer.args
    try:
        config = json.loads(json.dumps(args.to_dict(), default=str))
    except Exception:  # an exotic value somewhere: the config is a help, not a requirement
        config = {}
    sources = {}
    for fn, fn_name in zip(getattr(trainer, "reward_funcs", []), getattr(trainer, "reward_func_names", [])):
        if callable(fn) and not hasattr(fn, "config"):  # a function, not a reward model
            try:
                sources[fn_name] = inspect.getsource(fn)
            except (OSError, TypeError):
                pass
    model = getattr(getattr(trainer.model, "config", None), "_name_or_path", "") or ""
    dataset = getattr(trainer, "train_dataset", None)
    info = getattr(dataset, "info", None)
    label = (getattr(info, "dataset_name", None) or getattr(info, "builder_name", None) or "") if info else ""
    return {
        "name": name or getattr(args, "run_name", None) or Path(args.output_dir).name,
        "model": str(model),
        "config": config,
        "reward_names": list(getattr(trainer, "reward_func_names", [])),
        "reward_sources": sources,
        "dataset_label": str(label),
        "host": socket.gethostname(),
        "command": " ".join([sys.executable, *sys.argv]),
        "provenance": provenance.record(seed=getattr(args, "seed", None), script=sys.argv[0] if sys.argv else None),
    }


class Attachment:
    """What ``attach`` set up on one trainer: the spool, its writer and (main process) the sender."""

    def __init__(
        self, trainer, url: str, token: str, name: str | None, flush_timeout: float, token_sample_groups: int = 0
    ):
        self.trainer = trainer
        self.flush_timeout = flush_timeout
        self.main = trainer.accelerator.is_main_process
        self.finished = False
        self.fresh_columns: set[str] = set()
        self.folder = Path(trainer.args.output_dir) / SPOOL_DIR
        self.shards = self.folder / TOKENS_DIR
        self.sender: Sender | None = None
        self.tokens: TokenCapture | None = None
        self.resumed = False
        self.lock = None
        if self.main:
            self.main = self._only_writer(trainer)
        if not self.main:
            self.writer = NullWriter()
        else:
            spool = self.folder / "events.jsonl"
            state_path = self.folder / "run.json"
            state = json.loads(state_path.read_text()) if state_path.exists() else None
            if not state or state.get("url") != url.rstrip("/"):
                # no run on this server yet: it is made on first contact and takes the whole spool from its start
                state = None
                (self.folder / "acked").unlink(missing_ok=True)
            # The spool is never deleted: what it holds is this output_dir's run, sent or not. A script that runs
            # again here (from a checkpoint, or from scratch) continues that run, whether or not the server ever
            # answered: its resume marker drops the steps it trains again.
            self.resumed = bool(state) or whole_spool(spool) > 0
            self.writer = SpoolWriter(spool)
            self.sender = RunSender(
                Api(url, token),
                state,
                run_description(trainer, name),
                state_path,
                spool,
                self.folder / "acked",
                self.shards,
            )
            self.sender.start()
        self._wrap()
        if token_sample_groups and (self.main or not trainer.accelerator.is_main_process):
            # every process of a distributed trainer captures (the shard of a step gathers every rank's rows); the
            # main one writes. One that trains alone and is not sent captures nothing.
            self.tokens = TokenCapture(trainer, self.shards, token_sample_groups)
            self.tokens.hook()
        trainer.add_callback(AttachCallback(self))
        atexit.register(self.close, failed_if_open=True)

    def _only_writer(self, trainer) -> bool:
        """Whether this process writes the spool: the launch's first process, and the only one writing it (a lock
        on the spool, held until the run is closed). Says why when it does not."""
        ranks = launch_ranks()
        if trainer.accelerator.num_processes == 1 and ranks[1] > 1:
            # a launcher started several processes, but the trainer of each is not distributed (accelerate found no
            # GPU and use_cpu is not set): each trains the whole run alone, in one output_dir; the first is sent
            if ranks[0] != 0:
                _log(
                    f"grpo-web: process {ranks[0]} of {ranks[1]} trains alone (its trainer is not distributed: on a "
                    "machine without GPUs set use_cpu=True in GRPOConfig); only process 0's run is sent"
                )
                return False
            _log(
                f"grpo-web: the {ranks[1]} processes of this launch each train alone (their trainers are not "
                "distributed: on a machine without GPUs set use_cpu=True in GRPOConfig); only this one's run is sent"
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock = spool_lock(self.folder)
        if self.lock is None:
            _log(
                f"grpo-web: another process is writing {self.folder} (two trainings in one output_dir); this one's "
                "run is not sent"
            )
            return False
        return True

    def _wrap(self) -> None:
        trainer, attachment = self.trainer, self
        generate_and_score = trainer._generate_and_score_completions
        log_extra = trainer._log_completion_extra

        def _log_completion_extra(column, values):
            # TRL extends a column's deque only in the batches it was logged for: note which ones this batch has
            attachment.fresh_columns.add(column)
            return log_extra(column, values)

        def _generate_and_score_completions(inputs):
            attachment.fresh_columns = set()
            output = generate_and_score(inputs)
            if trainer.model.training:
                capture_batch(trainer, inputs, output, attachment.writer, attachment.fresh_columns)
                if attachment.sender:
                    attachment.sender.wake()
            return output

        trainer._log_completion_extra = _log_completion_extra
        trainer._generate_and_score_completions = _generate_and_score_completions

    def flush_tokens(self, step: int) -> None:
        """The token values of optimizer step ``step`` to its shard (written by a thread, sent by the sender). A shard
        that cannot be written is named in the log; training goes on."""
        try:
            self.tokens.flush(step)
        except Exception as exc:
            _log(f"grpo-web: a token shard was not written ({exc.__cause__ or exc}); training goes on")

    def drop_shards_after(self, step: int) -> None:
        """The script runs again from its checkpoint at ``step``: the shards of the later steps it had not sent are
        trained again (the server drops those it had)."""
        for path in pending_shards(self.shards):
            if shard_step(path) > step:
                path.unlink(missing_ok=True)

    def close(self, failed: bool = False, error: str = "", failed_if_open: bool = False) -> None:
        """Write the last token shard, send what is left (waiting at most flush_timeout) and tell the server how the
        run ended."""
        if self.finished:
            return
        self.finished = True
        if self.tokens is not None:
            try:
                self.tokens.close()  # the writer thread's last shard is in the spool
            except Exception as exc:
                _log(f"grpo-web: a token shard was not written ({exc.__cause__ or exc})")
        if self.sender is None:
            return
        if failed_if_open:
            failed, error = True, error or "the training script ended before training did"
        sent = self.sender.flush(self.flush_timeout)
        self.sender.stop()
        if self.lock is not None:
            self.lock.close()  # the spool is free for the next run of the script
        if not sent:
            # one line: what is left, and how it goes (the spool keeps it; the next run here sends it first)
            left = f"grpo-web: {self.sender.pending()} bytes of this run not sent"
            if self.sender.error:
                _log(f"{left}: the server refused them ({self.sender.error}); they are kept in {self.folder}")
            else:
                why = (
                    "the server was not reached" if self.sender.unreached else f"not taken in {self.flush_timeout:g} s"
                )
                _log(
                    f"{left} ({why}); they wait in {self.folder}: run this script again from its last checkpoint in "
                    f"{self.trainer.args.output_dir} to send them"
                )
                return  # the run ends on the server when they arrive
        try:
            self.sender.finish(failed=failed, error=error)
        except Exception as exc:
            _log(f"grpo-web: could not tell the server the run ended: {exc}")


class RunSender(Sender):
    """The sender of one run: it first makes the run on the server (or finds it again, from run.json)."""

    def __init__(
        self,
        api: Api,
        state: dict | None,
        description: dict,
        state_path: Path,
        spool: Path,
        acked: Path,
        shards: Path | None = None,
    ):
        super().__init__(
            api,
            state["run_id"] if state else None,
            state["resume_key"] if state else "",
            spool,
            acked,
            log=_log,
            shards=shards,
        )
        self.description, self.state_path = description, state_path

    def send_once(self) -> bool:
        if self.run_id is None:
            status, answer = self.api.json("POST", "/runs", self.description)
            if status != 200:
                from grpo_web_attach.sender import Refused

                raise Refused(f"{status}: {answer.get('detail') or answer}")
            self.run_id, self.resume_key = answer["id"], answer["resume_key"]
            write_atomic(
                self.state_path,
                json.dumps({"run_id": self.run_id, "resume_key": self.resume_key, "url": self.api.url}),
            )
            self.acked = read_acked(self.acked_path)
            _log(f"grpo-web: this run is {self.api.url}{answer.get('url', '')}")
            return True
        return super().send_once()

    def finish(self, failed: bool, error: str) -> None:
        if self.run_id is not None:
            self.api.json(
                "POST",
                f"/runs/{self.run_id}/finish",
                {"resume_key": self.resume_key, "failed": failed, "error": error[:2000]},
            )


def whole_spool(spool: Path) -> int:
    """The size of ``spool`` after cutting a line a killed process left half-written (so that the next line does not
    join it); 0 when there is none."""
    try:
        size = spool.stat().st_size
    except FileNotFoundError:
        return 0
    if size:
        with open(spool, "rb+") as fh:
            fh.seek(max(0, size - BATCH_BYTES))
            tail = fh.read()
            if not tail.endswith(b"\n"):
                size -= len(tail) - (tail.rfind(b"\n") + 1)
                fh.truncate(size)
    return size


def launch_ranks() -> tuple[int, int]:
    """(this process's rank, the number of processes) its launcher (torchrun, accelerate, MPI) gave it."""
    for rank, size in (
        ("RANK", "WORLD_SIZE"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
    ):
        try:
            return int(os.environ[rank]), int(os.environ[size])
        except (KeyError, ValueError):
            continue
    return 0, 1


def attach(
    trainer,
    url: str | None = None,
    token: str | None = None,
    name: str | None = None,
    flush_timeout: float = FLUSH_TIMEOUT_S,
    token_sample_groups: int | None = None,
) -> Attachment:
    """Send ``trainer``'s run (a TRL GRPOTrainer) to grpo-web at ``url`` with ``token`` (GRPO_WEB_URL and
    GRPO_WEB_TOKEN by default; a token of scope attach or write, from the Tokens page). Call it on every process
    (each gathers its part of a batch); only the main one sends.

    ``token_sample_groups`` (GRPO_WEB_TOKEN_SAMPLE_GROUPS by default, else 0: off): the first that many groups of
    each generation batch (-1: every group) also send their per-token values, as TRL computed them at the update,
    for the run's token view."""
    url = url or os.environ.get("GRPO_WEB_URL", "")
    token = token or os.environ.get("GRPO_WEB_TOKEN", "")
    if not url or not token:
        raise ValueError("grpo-web: give url and token, or set GRPO_WEB_URL and GRPO_WEB_TOKEN")
    groups = sample_groups_setting(token_sample_groups)
    existing = getattr(trainer, "_grpo_web_attachment", None)
    if existing is not None:
        return existing
    attachment = Attachment(trainer, url, token, name, flush_timeout, groups)
    trainer._grpo_web_attachment = attachment
    return attachment


def sample_groups_setting(value: int | None) -> int:
    """``token_sample_groups`` as given, else GRPO_WEB_TOKEN_SAMPLE_GROUPS, else 0; an integer of -1 or more."""
    source = "token_sample_groups"
    if value is None:
        value, source = (
            os.environ.get("GRPO_WEB_TOKEN_SAMPLE_GROUPS", "").strip() or "0",
            "GRPO_WEB_TOKEN_SAMPLE_GROUPS",
        )
    try:
        groups = None if isinstance(value, (bool, float)) else int(value)
    except (TypeError, ValueError):
        groups = None
    if groups is None or groups < -1:
        raise ValueError(f"grpo-web: {source} is a number of groups (-1 every group, 0 none), not {value!r}")
    return groups


def _trainer_callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class AttachCallback(_trainer_callback_base()):
    """TRL's metrics and checkpoints into the spool, and the run's end."""

    def __init__(self, attachment: Attachment):
        self.attachment = attachment

    def on_train_begin(self, args, state, control, **kwargs):
        a = self.attachment
        if a.main and (state.global_step > 0 or a.resumed):
            # the script runs again in this output_dir (from a checkpoint, or from scratch): the steps past it are
            # trained again, and the server keeps this attempt's rows of them, as TRL's completions files do
            a.writer.write("resume", step=state.global_step)
            a.drop_shards_after(state.global_step)
            a.resumed = False

    def on_step_end(self, args, state, control, **kwargs):
        if self.attachment.tokens is not None:
            self.attachment.flush_tokens(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            self.attachment.writer.write("metrics", step=state.global_step, max_steps=state.max_steps, metrics=logs)

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = f"{args.output_dir}/checkpoint-{state.global_step}"
            self.attachment.writer.write("checkpoint", step=state.global_step, path=path)

    def on_train_end(self, args, state, control, **kwargs):
        self.attachment.close()


class GrpoWebCallback(_trainer_callback_base()):
    """For scripts that only take callbacks (open-r1's grpo.py): ``callbacks=[GrpoWebCallback()]``. At the start of
    training it finds its GRPOTrainer (the ``self`` of a caller up the stack) and attaches to it."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        name: str | None = None,
        token_sample_groups: int | None = None,
    ):
        self.url, self.token, self.name = url, token, name
        self.token_sample_groups = token_sample_groups
        self.attachment: Attachment | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        if self.attachment is not None:
            return
        trainer = find_trainer()
        if trainer is None:
            _log("grpo-web: GrpoWebCallback found no GRPOTrainer calling it; nothing is sent")
            return
        self.attachment = attach(
            trainer, url=self.url, token=self.token, name=self.name, token_sample_groups=self.token_sample_groups
        )
        # attach added its own callback after this one: this begin is its begin too
        for callback in trainer.callback_handler.callbacks:
            if isinstance(callback, AttachCallback) and callback.attachment is self.attachment:
                callback.on_train_begin(args, state, control, **kwargs)


def find_trainer():
    from trl import GRPOTrainer

    frame = inspect.currentframe()
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, GRPOTrainer):
            return candidate
        frame = frame.f_back
    return None
