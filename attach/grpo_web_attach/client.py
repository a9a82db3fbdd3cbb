"""The client itself: ``attach``, its callbacks and the run's sender (what ``grpo_web_attach`` gives a script).
Imported on first use, so that the server side, which shares ``grpo_web_attach.capture`` and ``grpo_web_attach.tokens``
with it, never loads transformers."""

from __future__ import annotations

import atexit
import inspect
import json
import os
import shutil
import socket
import sys
from pathlib import Path

from grpo_web_attach.capture import NullWriter, SpoolWriter, capture_batch
from grpo_web_attach.sender import Api, Sender, pending_shards, read_acked, shard_step, write_atomic
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
        if not self.main:
            self.writer = NullWriter()
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            state_path = self.folder / "run.json"
            state = json.loads(state_path.read_text()) if state_path.exists() else None
            self.resumed = bool(state) and state.get("url") == url.rstrip("/")
            api = Api(url, token)
            if not self.resumed:
                # a new run: its id comes from the server, before anything is sent (retried by the sender)
                for stale in ("events.jsonl", "acked"):
                    (self.folder / stale).unlink(missing_ok=True)
                shutil.rmtree(self.shards, ignore_errors=True)  # an earlier run's shards
                state = None
            self.writer = SpoolWriter(self.folder / "events.jsonl")
            self.sender = RunSender(
                api,
                state,
                run_description(trainer, name),
                state_path,
                self.folder / "events.jsonl",
                self.folder / "acked",
                self.shards,
            )
            self.sender.start()
        self._wrap()
        if token_sample_groups:
            # every process captures (the shard of a step gathers every rank's rows); the main one writes
            self.tokens = TokenCapture(trainer, self.shards, token_sample_groups)
            self.tokens.hook()
        trainer.add_callback(AttachCallback(self))
        atexit.register(self.close, failed_if_open=True)

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
        if not self.sender.flush(self.flush_timeout):
            _log(
                f"grpo-web: {self.sender.pending()} bytes not sent; run this script again from a checkpoint in "
                f"{self.trainer.args.output_dir} to send them"
            )
        self.sender.stop()
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
