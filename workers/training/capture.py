"""TRL extended at the narrowest point: capture each generation batch as TRL scored it, and TRL's logged metrics."""

from __future__ import annotations

import time

from grpo_web_attach.capture import capture_batch
from grpo_web_attach.tokens import TokenCapture
from grpo_web_protocol.events import EventWriter
from transformers import TrainerCallback
from trl import GRPOTrainer


class CapturingGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that appends every generation batch to the event log.

    The values are read back from what TRL itself recorded in ``self._logs`` during
    ``_generate_and_score_completions`` (prompts, completions, per-function rewards, advantages), so the stored
    advantages are TRL's, never recomputed here.
    """

    def __init__(
        self, *args, events: EventWriter, tokens_dir: str | None = None, token_sample_groups: int = 0, **kwargs
    ):
        super().__init__(*args, **kwargs)
        self._events = events
        self.step_timing = StepTiming()
        self.extra_logged_now: set[str] = set()  # the log_extra columns logged for the batch being scored
        # token-level values of a sample of each batch's groups, as TRL computed them at the update; the attach client
        # hooks the same capture into a user's trainer (grpo_web_attach.tokens)
        self.token_capture = None
        if tokens_dir and token_sample_groups:
            self.token_capture = TokenCapture(self, tokens_dir, token_sample_groups)
            self.token_capture.hook()
            self.add_callback(TokenShardCallback(self.token_capture))

    def train(self, *args, **kwargs):
        if self.token_capture is None:
            return super().train(*args, **kwargs)
        try:
            result = super().train(*args, **kwargs)
        except BaseException:
            self.token_capture.close(raise_error=False)  # the last shards still land whole; training's error wins
            raise
        self.token_capture.close()  # the writer thread's last shard is on disk when train returns
        return result

    def _generate(self, prompts):
        with self.step_timing.part("generation"):
            return super()._generate(prompts)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        with self.step_timing.part("reward"):  # sandboxed reward functions included
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _log_completion_extra(self, column: str, values: list):
        # TRL extends a column's deque only in the batches it was logged for: the rest hold an earlier batch's values
        self.extra_logged_now.add(column)
        super()._log_completion_extra(column, values)

    def _generate_and_score_completions(self, inputs):
        self.extra_logged_now = set()
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self._capture(inputs, output)
        return output

    def _capture(self, inputs: list[dict], output: dict) -> None:
        # one capture for both ways a run reaches grpo-web: this training program and the attach client
        self.step_timing.tokens += capture_batch(self, inputs, output, self._events, self.extra_logged_now)


class TokenShardCallback(TrainerCallback):
    """At the end of each optimizer step, the token values captured during it go to the step's shard."""

    def __init__(self, capture):
        self._capture = capture

    def on_step_end(self, args, state, control, **kwargs):
        self._capture.flush(state.global_step)


class StepTiming:
    """Where one optimizer step's wall time goes: generation, reward scoring (sandbox included), and the rest, the
    policy update (log-probabilities, loss, backward, optimizer step); and the completion tokens generated."""

    def __init__(self):
        self.parts: dict[str, float] = {}
        self.tokens = 0
        self.started: float | None = None
        self.step_s: float | None = None

    def part(self, name: str):
        timing = self

        class _Part:
            def __enter__(self):
                self.t = time.perf_counter()

            def __exit__(self, *exc):
                timing.parts[name] = timing.parts.get(name, 0.0) + time.perf_counter() - self.t

        return _Part()

    def begin(self):
        self.parts, self.tokens, self.started, self.step_s = {}, 0, time.perf_counter(), None

    def end(self):
        if self.started is not None:
            self.step_s = time.perf_counter() - self.started

    def metrics(self) -> dict:
        if self.step_s is None:
            return {}
        generation, reward = self.parts.get("generation", 0.0), self.parts.get("reward", 0.0)
        return {
            "timing/step_s": self.step_s,
            "timing/generation_s": generation,
            "timing/reward_s": reward,
            "timing/update_s": max(0.0, self.step_s - generation - reward),
            "timing/tokens_per_s": self.tokens / self.step_s if self.step_s > 0 else None,
            "timing/generation_tokens_per_s": self.tokens / generation if generation > 0 else None,
        }


class MetricsCallback(TrainerCallback):
    """TRL's own logged metrics (reward, reward_std, rewards/<fn>/mean, kl, entropy, completions/...), per step,
    with the step's time split (``timing/...``) when the trainer keeps one."""

    def __init__(self, events: EventWriter, timing: StepTiming | None = None):
        self._events = events
        self._timing = timing

    def on_step_begin(self, args, state, control, **kwargs):
        if self._timing:
            self._timing.begin()

    def on_step_end(self, args, state, control, **kwargs):
        if self._timing:
            self._timing.end()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            timing = self._timing.metrics() if self._timing and "loss" in logs else {}
            self._events.write("metrics", step=state.global_step, max_steps=state.max_steps, metrics={**logs, **timing})

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = f"{args.output_dir}/checkpoint-{state.global_step}"
            self._events.write("checkpoint", step=state.global_step, path=path)
