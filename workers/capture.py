"""TRL extended at the narrowest point: capture each generation batch as TRL scored it, and TRL's logged metrics."""

from __future__ import annotations

from trl import GRPOTrainer
from transformers import TrainerCallback

from workers.events import EventWriter


class CapturingGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that appends every generation batch to the event log.

    The values are read back from what TRL itself recorded in ``self._logs`` during
    ``_generate_and_score_completions`` (prompts, completions, per-function rewards, advantages), so the stored
    advantages are TRL's, never recomputed here.
    """

    def __init__(self, *args, events: EventWriter, **kwargs):
        super().__init__(*args, **kwargs)
        self._events = events

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:
            self._capture(inputs, output)
        return output

    def _capture(self, inputs: list[dict], output: dict) -> None:
        from accelerate.utils import gather_object

        local_count = len(inputs)
        # the row's own columns (answer, ...): what the reward functions saw beside the completion
        columns = gather_object([{k: v for k, v in x.items() if k != "prompt"} for x in inputs])
        # completion_mask: (B_local, T) -> lengths (B_all,) after gathering across processes
        lengths = self.accelerator.gather(output["completion_mask"].sum(dim=1)).tolist()
        has_eos = self.accelerator.gather(
            (output["completion_ids"] == self.processing_class.eos_token_id).any(dim=1)
        ).tolist()
        if not self.accelerator.is_main_process:
            return
        n = local_count * self.accelerator.num_processes
        logs = self._logs
        prompts = list(logs["prompt"])[-n:]
        completions = list(logs["completion"])[-n:]
        advantages = list(logs["advantages"])[-n:]
        per_func = [list(logs["rewards"][name])[-n:] for name in self.reward_func_names]
        weights = self.reward_weights.tolist()
        G = self.num_generations
        rows = []
        for i in range(n):
            rewards = [per_func[k][i] for k in range(len(per_func))]
            finite = [(r, w) for r, w in zip(rewards, weights) if r == r]  # NaN != NaN: None from the function
            rows.append({
                "index": i,
                "group": i // G,
                "prompt": prompts[i],
                "completion": completions[i],
                "rewards": rewards,
                "reward": sum(r * w for r, w in finite) if finite else None,
                "advantage": advantages[i],
                "length": int(lengths[i]),
                "truncated": not has_eos[i],
                "columns": columns[i],
            })
        # The batch trains the optimizer step that follows: TRL's completions table labels it the same way.
        self._events.write("rollouts", step=self.state.global_step + 1, num_generations=G,
                           reward_names=list(self.reward_func_names), rows=rows)


class MetricsCallback(TrainerCallback):
    """TRL's own logged metrics (reward, reward_std, rewards/<fn>/mean, kl, entropy, completions/...), per step."""

    def __init__(self, events: EventWriter):
        self._events = events

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            self._events.write("metrics", step=state.global_step, max_steps=state.max_steps, metrics=dict(logs))

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            path = f"{args.output_dir}/checkpoint-{state.global_step}"
            self._events.write("checkpoint", step=state.global_step, path=path)
